#include "gateway/client_address.h"

#include <boost/asio/ip/address.hpp>


namespace kvs::gateway {

namespace {

// The address as 16 bytes (IPv4 v4-mapped); false when it does not parse.
bool ToBytes(std::string_view text, std::array<uint8_t, 16>* out) {
  boost::system::error_code ec;
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  const auto a = boost::asio::ip::make_address(std::string(text), ec);
  if (ec) return false;
  *out = a.is_v4() ? boost::asio::ip::make_address_v6(boost::asio::ip::v4_mapped, a.to_v4()).to_bytes()
                   : a.to_v6().to_bytes();
  return true;
}

}  // namespace

std::string_view PeerAddress(std::string_view remote) {
  const size_t colon = remote.rfind(':');
  return colon == std::string_view::npos ? remote : remote.substr(0, colon);
}

StatusOr<TrustedProxies> TrustedProxies::Parse(std::string_view list) {
  TrustedProxies t;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    const size_t slash = item.find('/');
    Net n{};
    if (!ToBytes(item.substr(0, slash), &n.addr)) {
      return InvalidArgument("gateway.trusted_proxies: \"{}\" is not an address or CIDR range", item);
    }
    const bool v4 = item.find(':') == std::string_view::npos;
    const int width = v4 ? 32 : 128;
    int prefix = width;
    if (slash != std::string_view::npos) {
      const std::string bits(item.substr(slash + 1));
      if (bits.empty() || bits.size() > 3 || bits.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(bits) > width) {
        return InvalidArgument("gateway.trusted_proxies: \"{}\": the prefix length must be 0 to {}", item, width);
      }
      prefix = std::stoi(bits);
    }
    n.prefix = v4 ? 96 + prefix : prefix;
    t.nets_.push_back(n);
  }
  return t;
}

bool TrustedProxies::Contains(std::string_view ip) const {
  std::array<uint8_t, 16> a{};
  if (nets_.empty() || !ToBytes(ip, &a)) return false;
  for (const Net& n : nets_) {
    int bits = n.prefix;
    bool match = true;
    for (size_t i = 0; i < 16 && bits > 0 && match; ++i, bits -= 8) {
      const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
      match = (a[i] & mask) == (n.addr[i] & mask);
    }
    if (match) return true;
  }
  return false;
}

std::string TrustedProxies::ClientOf(std::string_view peer, std::string_view xff) const {
  std::string client(peer);
  if (!Contains(peer)) return client;
  // Right to left: each hop a trusted proxy appended; stop at the first
  // address that is not a trusted proxy (or is not an address at all).
  while (!xff.empty()) {
    const size_t comma = xff.rfind(',');
    std::string_view hop = comma == std::string_view::npos ? xff : xff.substr(comma + 1);
    xff = comma == std::string_view::npos ? std::string_view() : xff.substr(0, comma);
    while (!hop.empty() && hop.front() == ' ') hop.remove_prefix(1);
    while (!hop.empty() && hop.back() == ' ') hop.remove_suffix(1);
    std::array<uint8_t, 16> ignored{};
    if (!ToBytes(hop, &ignored)) break;
    client = std::string(hop);
    if (!Contains(hop)) break;
  }
  return client;
}

}  // namespace kvs::gateway
