// FakeModelRunner: a deterministic ModelRunner for engine tests and
// benchmarks, no model needed.
//
// Its "KV" is, for every slot of every block, the position and token written
// there and a hash of the whole history up to and including that token:
//   chain[p] = Mix(chain[p-1], token[p]),  chain[-1] = kRoot.
// Forward reads positions [0, start_pos) through the block table and checks
// each slot: written for that very position, and its chain value follows
// from the previous slot's and its own token. So a wrong block table, a
// prefix-cache hit on the wrong block or a block reused while still needed
// breaks the chain and Forward fails with Internal, naming the slot.
// Logits are a pseudo-random function of chain[last], so outputs depend on
// the whole prefix: any KV mix-up also changes the tokens generated, which
// tests compare with ReferenceLogits-based generation.
// Thread-safety: engine thread only, like every runner; the counters are
// read after the engine stopped (or between synchronous steps).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/model_runner.h"

namespace kvs::engine {

struct FakeModelRunnerOptions {
  int32_t vocab_size = 64;
  int32_t block_size = 16;
  int32_t num_blocks = 256;
  int32_t eos_token_id = -1;  // >= 0: this token gets eos_logit_bias
  float eos_logit_bias = 0.0f;
  bool verify_reads = true;   // check the chain of every position read (O(context) per sequence)
  // > 0: a window KV group as a sliding-window model's (model_runner.h):
  // every token is also written through window_block_table, and positions
  // [start_pos - window + 1, start_pos) are read back through it and must
  // hold the same history as the full group's slots.
  int32_t window = 0;
  int32_t num_window_blocks = 0;
  // Added to the logit of (last token + 1) % vocab_size: a large value makes
  // the model count upwards, so a sequence repeats itself and n-gram drafts
  // hold (speculative decoding tests).
  float follow_bias = 0.0f;
};

class FakeModelRunner : public ModelRunner {
 public:
  explicit FakeModelRunner(const FakeModelRunnerOptions& options);

  int32_t vocab_size() const override { return options_.vocab_size; }
  int32_t block_size() const override { return options_.block_size; }
  int32_t num_blocks() const override { return options_.num_blocks; }
  int32_t window() const override { return options_.window; }
  int32_t num_window_blocks() const override { return options_.window > 0 ? options_.num_window_blocks : 0; }
  Status Forward(const ForwardBatch& batch, std::span<float> logits) override;
  // Wipes the blocks' slots (as returned memory reads as zeros), so a
  // released block that someone still reads fails the chain check.
  void ReleaseBlocks(std::span<const int32_t> block_ids) override;
  void ReleaseWindowBlocks(std::span<const int32_t> block_ids) override;
  int64_t kv_committed_bytes() const override { return num_dirty_blocks_; }  // one "byte" per written block

  // The logits the runner produces after `history` (prompt + output so far).
  static void ReferenceLogits(std::span<const int32_t> history, const FakeModelRunnerOptions& options,
                              std::span<float> logits);

  // Called at the start of every Forward (tests inspect batches).
  std::function<void(const ForwardBatch&)> on_forward;
  // Forward calls from now on fail with Internal after this many more succeed; -1: never.
  int64_t fail_after_calls = -1;

  int64_t num_forward_calls() const { return num_forward_calls_; }
  int64_t num_tokens_computed() const { return num_tokens_computed_; }
  int64_t max_tokens_in_batch() const { return max_tokens_in_batch_; }
  int64_t num_blocks_released() const { return num_blocks_released_; }

 private:
  struct Slot {
    int32_t position = -1;  // -1: never written
    int32_t token = -1;
    uint64_t chain = 0;
  };
  static uint64_t Mix(uint64_t chain, int32_t token);
  static void LogitsFromChain(uint64_t chain, int32_t last_token, const FakeModelRunnerOptions& options,
                              std::span<float> logits);
  Status RunSeq(const ForwardSeq& s, std::span<float> logits);
  // Checks the window group's slots of s's visible history against `chain_at`
  // (the full group's chain at each position; empty: positions only).
  Status CheckWindow(const ForwardSeq& s, std::span<const uint64_t> chain_at) const;

  FakeModelRunnerOptions options_;
  std::vector<Slot> slots_;  // [num_blocks * block_size]
  std::vector<uint8_t> dirty_;  // [num_blocks] written since released
  std::vector<Slot> window_slots_;  // [num_window_blocks * block_size]
  std::vector<uint64_t> chain_at_;  // scratch: chain at each position read
  int64_t num_dirty_blocks_ = 0;
  int64_t num_blocks_released_ = 0;
  int64_t num_forward_calls_ = 0;
  int64_t num_tokens_computed_ = 0;
  int64_t max_tokens_in_batch_ = 0;
};

}  // namespace kvs::engine
