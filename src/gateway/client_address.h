// TrustedProxies: which TCP peers may tell the gateway who the client is.
//
// Behind a load balancer every connection comes from the balancer, so the
// audit log, and anything keyed by the client, would name the balancer. A
// balancer in gateway.trusted_proxies (a comma-separated list of addresses
// and CIDR ranges, IPv4 or IPv6) appends the address it saw to
// X-Forwarded-For; the gateway then takes as the client the right-most
// address of that header that is not itself a trusted proxy (everything to
// its left was written by the client, who may forge it). A peer that is not
// trusted is the client, whatever headers it sends.
// Thread-safety: immutable after Parse; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kvs::gateway {

class TrustedProxies {
 public:
  // "" : none. InvalidArgument naming the entry that does not parse.
  static StatusOr<TrustedProxies> Parse(std::string_view list);

  bool empty() const { return nets_.empty(); }
  bool Contains(std::string_view ip) const;
  // peer: the TCP peer's address (no port); x_forwarded_for: the header's
  // value ("" when absent). Returns the client's address.
  std::string ClientOf(std::string_view peer, std::string_view x_forwarded_for) const;

 private:
  struct Net {
    std::array<uint8_t, 16> addr;  // IPv4 as v4-mapped IPv6
    int prefix;                    // bits, of the 128
  };
  std::vector<Net> nets_;
};

// "1.2.3.4:5678" or "::1:5678" (an Exchange's remote()) -> the address.
std::string_view PeerAddress(std::string_view remote);

}  // namespace kvs::gateway
