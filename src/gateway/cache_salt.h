// The prefix-cache namespace the gateway gives a tenant's requests. Used by
// the proxy (each request) and the warm-up (each replayed prompt), which
// must agree, so it is one function of its own, below both.
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

namespace kvs::gateway {

// The cache_salt the gateway sends a replica for a tenant's request under
// gateway.prefix_cache_scope "tenant": "t:" + SHA-256 hex of (SHA-256 hex of
// the tenant, "\n", the client's cache_salt). Fixed length (66 bytes, within the API's 256),
// and no client salt of one tenant can equal another tenant's, so tenants
// never share a prefix-cache block; the same tenant's requests still do.
// The replica scopes it further by the gateway's key (PrefixCacheNamespace),
// so a client that reaches a replica with a key of its own cannot address
// these namespaces either.
std::string TenantCacheSalt(std::string_view tenant, std::string_view client_salt);

}  // namespace kvs::gateway
