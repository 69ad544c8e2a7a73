// Helpers for BlockManager tests: sequences with fresh ids, and the engine's
// admit / compute steps without an engine.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/block_manager.h"

namespace kvs::engine::testing {

inline Sequence MakeSeq(std::vector<int32_t> tokens, std::string salt = "") {
  static int64_t next_id = 0;
  Sequence s(next_id++, "r", std::move(tokens), SamplingParams{});
  s.cache_salt = std::move(salt);
  return s;
}

// Admits seq with its prefix hits and blocks for `positions` positions.
inline PrefixMatch Admit(BlockManager& bm, Sequence& seq, int32_t positions) {
  PrefixMatch m = bm.MatchPrefix(seq);
  EXPECT_TRUE(bm.CanAllocate(m, positions));
  bm.Allocate(seq, m, positions);
  return m;
}

// Marks the first `n` tokens as computed and publishes the full blocks.
inline void Compute(BlockManager& bm, Sequence& seq, int32_t n) {
  seq.num_computed_tokens = n;
  bm.CommitComputed(seq);
}

// For random-operation tests: one of `prefixes` followed by 1-20 random
// tokens in [0, 3), with cache salt "s" one time in four.
inline std::unique_ptr<Sequence> RandomPrefixedSeq(std::mt19937_64& rng,
                                                   const std::vector<std::vector<int32_t>>& prefixes, int64_t id) {
  std::vector<int32_t> tokens = prefixes[rng() % prefixes.size()];
  const int extra = 1 + static_cast<int>(rng() % 20);
  for (int i = 0; i < extra; ++i) tokens.push_back(static_cast<int32_t>(rng() % 3));
  auto seq = std::make_unique<Sequence>(id, "r", tokens, SamplingParams{});
  seq->cache_salt = rng() % 4 == 0 ? "s" : "";
  return seq;
}

}  // namespace kvs::engine::testing
