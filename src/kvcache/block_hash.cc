#include "kvcache/block_hash.h"

#include <bit>
#include <cstring>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include "base/sha256.h"

namespace kvs::kvcache {
namespace {

void PutLe64(uint64_t v, unsigned char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

BlockHash FromXxh(XXH128_hash_t h) { return BlockHash{h.low64, h.high64}; }

}  // namespace

BlockHash BlockHashRoot(std::string_view cache_salt) {
  return FromXxh(XXH3_128bits_withSeed(cache_salt.data(), cache_salt.size(), kBlockHashSaltSeed));
}

BlockHash ChainBlockHash(const BlockHash& parent, std::span<const int32_t> tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, 0);
  unsigned char head[16];
  PutLe64(parent.lo, head);
  PutLe64(parent.hi, head + 8);
  XXH3_128bits_update(&state, head, sizeof(head));
  if constexpr (std::endian::native == std::endian::little) {
    XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  } else {
    for (int32_t t : tokens) {
      const auto u = static_cast<uint32_t>(t);
      const unsigned char b[4] = {static_cast<unsigned char>(u), static_cast<unsigned char>(u >> 8),
                                  static_cast<unsigned char>(u >> 16), static_cast<unsigned char>(u >> 24)};
      XXH3_128bits_update(&state, b, sizeof(b));
    }
  }
  return FromXxh(XXH3_128bits_digest(&state));
}

std::vector<BlockHash> ChainBlockHashes(std::string_view cache_salt, std::span<const int32_t> tokens,
                                        int32_t block_size) {
  std::vector<BlockHash> out;
  if (block_size <= 0) return out;
  const size_t bs = static_cast<size_t>(block_size);
  out.reserve(tokens.size() / bs);
  BlockHash h = BlockHashRoot(cache_salt);
  for (size_t b = 0; b + bs <= tokens.size(); b += bs) {
    h = ChainBlockHash(h, tokens.subspan(b, bs));
    out.push_back(h);
  }
  return out;
}

std::string PrefixCacheNamespace(std::string_view key_digest, std::string_view cache_salt) {
  if (key_digest.empty() && cache_salt.empty()) return "";
  std::string material(key_digest);
  material += '\n';  // a digest never contains one: key and salt cannot run into each other
  material += cache_salt;
  return Sha256Hex(material).substr(0, 32);
}

}  // namespace kvs::kvcache
