// Chained prefix-cache block hashes: the one definition shared by the engine's
// BlockManager and by anything that must predict which blocks a replica has
// cached (the gateway's prefix-aware router computes the same hashes from
// token ids and the cache salt). Depends only on libxxhash (link
// kvs_block_hash); no engine types.
//
// Definition (XXH3-128, xxHash 0.8; all integers little-endian):
//   root      = XXH3_128bits_withSeed(salt bytes, kBlockHashSaltSeed)
//   hash[0]   = Chain(root, tokens[0 : B])
//   hash[i]   = Chain(hash[i-1], tokens[i*B : (i+1)*B])
//   Chain(p, t) = XXH3_128bits_withSeed(bytes, 0) over the 16 + 4*B bytes
//                 p.lo (8 bytes) | p.hi (8 bytes) | t[0] (int32) | ... | t[B-1]
// where B is the block size in tokens, lo/hi are XXH128_hash_t's low64 and
// high64, and only full blocks are hashed. So hash[i] names the whole prefix
// tokens[0 : (i+1)*B] under one salt.
//
// The BlockManager never trusts a hash alone: a hit also compares the block's
// tokens, the identity of its parent block and (block 0) the salt, so even
// a forced collision is a miss, never another prefix's KV.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::kvcache {

struct BlockHash {
  uint64_t lo = 0, hi = 0;
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ULL)); }
};

// Seed of the root hash ("kvserv"): keeps the empty salt's root away from 0.
inline constexpr uint64_t kBlockHashSaltSeed = 0x6b7673657276ULL;

// The chain root for a cache salt ("" for none).
BlockHash BlockHashRoot(std::string_view cache_salt);
// hash[i] from hash[i-1] (or the root) and the block's token ids.
BlockHash ChainBlockHash(const BlockHash& parent, std::span<const int32_t> tokens);
// The hashes of every full block of `tokens` (block_size > 0).
std::vector<BlockHash> ChainBlockHashes(std::string_view cache_salt, std::span<const int32_t> tokens,
                                        int32_t block_size);

// The cache salt a replica runs a request with: "" when neither an API key
// nor a cache_salt applies (one shared cache); else 128 bits (32 hex digits)
// of SHA-256(key digest "\n" cache_salt), so each API key is its own
// namespace and cache_salt subdivides it. key_digest: Sha256Hex of the
// request's API key ("" without keys). The server applies it to every
// request; a router predicting the replica's hashes applies it too.
std::string PrefixCacheNamespace(std::string_view key_digest, std::string_view cache_salt);

}  // namespace kvs::kvcache
