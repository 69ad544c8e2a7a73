// The names of the gateway's routing policies (PoolConfig::routing), written
// once: the configuration accepts exactly these, MakeRoutingPolicy
// (routing.h) maps each to its policy, and each policy reports its own.
// Thread-safety: constants.
#pragma once

#include <array>

namespace kvs::gateway {

inline constexpr const char* kRoundRobin = "round_robin";
inline constexpr const char* kLeastLoad = "least_load";  // the default
inline constexpr const char* kCacheAware = "cache_aware";
inline constexpr std::array<const char*, 3> kRoutingPolicyNames = {kRoundRobin, kLeastLoad, kCacheAware};

}  // namespace kvs::gateway
