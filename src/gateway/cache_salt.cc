#include "gateway/cache_salt.h"

#include "base/sha256.h"

namespace kvs::gateway {

std::string TenantCacheSalt(std::string_view tenant, std::string_view client_salt) {
  // The tenant's own digest first: fixed length, so no (tenant, salt) pair
  // can be written as another's.
  std::string in = Sha256Hex(tenant);
  in.append("\n").append(client_salt);
  return "t:" + Sha256Hex(in);
}

}  // namespace kvs::gateway
