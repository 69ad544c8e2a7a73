// Sequence: the engine-side state of one request: its tokens (prompt, then
// output), how far its KV has been computed, the KV blocks that hold it, and
// its sampling state. A data holder: the Scheduler moves it between states,
// the BlockManager fills block_table/block_hashes, the Sampler reads it.
//
// Invariants (checked by the engine's TEST_CheckInvariants):
//   0 <= num_computed_tokens <= num_tokens() - 1 while not FINISHED: the last
//     token (the newest sampled one, or the last prompt token) is never cached,
//     because computing it is what produces the next logits.
//   block_table covers at least num_computed_tokens positions; position p
//     lives in block_table[p / block_size] at slot p % block_size.
//   With a window group (block_manager.h) window_block_table has the same
//     length and indexing for the sliding layers; its first
//     num_window_dropped entries are -1 (out of every query's window), the
//     others are block ids.
//   WAITING sequences hold no blocks and have num_computed_tokens == 0.
//   FINISHED sequences hold no blocks and have a finish_reason.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "kvcache/block_hash.h"
#include "engine/sampling_params.h"
#include "engine/speculative.h"
#include "grammar/matcher.h"

namespace kvs::engine {

using Clock = std::chrono::steady_clock;

enum class SequenceStatus { kWaiting, kRunning, kFinished };

enum class FinishReason {
  kNone = 0,
  kStop,       // EOS or a stop token id was sampled
  kLength,     // max_tokens (or the context length) reached
  kCancelled,  // Engine::Cancel, or the stream was abandoned
  kError,      // the model runner failed, or the engine stopped
};
const char* FinishReasonName(FinishReason r);  // "stop", "length", "cancelled", "error"

struct Sequence {
  Sequence(int64_t seq_id, std::string request_id, std::vector<int32_t> prompt, SamplingParams params);

  // Identity and request.
  int64_t seq_id = 0;        // engine-assigned, increasing in arrival order
  std::string request_id;    // caller-visible
  SamplingParams params;
  int32_t priority = 0;      // lower is served first under the priority policy
  std::string cache_salt;    // prefix-cache namespace: sequences share KV only within one salt
  Clock::time_point arrival_time;

  // Tokens and KV progress.
  SequenceStatus status = SequenceStatus::kWaiting;
  std::vector<int32_t> token_ids;        // [num_tokens]: prompt then output
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;       // leading tokens whose KV is written (cached ones included)
  std::vector<int32_t> block_table;      // KV block ids, in position order
  std::vector<kvcache::BlockHash> block_hashes;   // chained prefix-cache hashes of full blocks (BlockManager's cache)
  int32_t num_committed_blocks = 0;      // leading blocks already offered to the prefix cache
  std::vector<int32_t> window_block_table;  // sliding layers' KV blocks (empty without a window group)
  int32_t num_window_dropped = 0;        // leading window_block_table entries freed (-1)
  int32_t last_twin = -1;                // BlockManager: the published full block holding this sequence's
                                         // KV of block num_committed_blocks - 1; -1: none

  // Sampling state: advanced once per sampled token, so a seeded sequence
  // draws the same numbers whatever else shares its batches.
  std::mt19937_64 rng;
  // Constrained decoding: the position in the request's grammar (nullptr:
  // unconstrained). The sampler masks with it and advances it by each
  // sampled token; a recompute after preemption keeps it (the output tokens
  // it reflects are kept too).
  std::unique_ptr<grammar::GrammarMatcher> matcher;

  // Speculative decoding (engine/speculative.h): this step's chunk to
  // verify, [last token, drafts...] (empty: no drafts this step; the
  // scheduler may shorten it), and the adaptive draft length.
  std::vector<int32_t> spec_tokens;
  SpecControl spec;
  // A draft model (engine/draft_model.h): positions [0, draft_num_computed)
  // hold this sequence's KV in the draft's store, written since admission
  // number draft_admission (another admission starts again from 0);
  // draft_catch_up: positions the draft writes this step without drafting.
  int32_t draft_num_computed = 0;
  int32_t draft_admission = -1;
  int32_t draft_catch_up = 0;

  // Outcome and accounting.
  std::optional<FinishReason> finish_reason;
  std::optional<int32_t> stop_token_id;  // the EOS/stop id that ended it (kStop)
  Status error;                          // kError only
  int32_t num_cached_tokens = 0;         // prefix-cache hits at the first admission
  int32_t num_computed_prompt_tokens = 0;  // prompt positions this request ran through the model
  int32_t num_preemptions = 0;
  int32_t num_admissions = 0;
  std::optional<Clock::time_point> first_scheduled_time;
  std::optional<Clock::time_point> first_token_time;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return {token_ids.data(), static_cast<size_t>(num_prompt_tokens)}; }
  std::span<const int32_t> output() const {
    return std::span<const int32_t>(token_ids).subspan(static_cast<size_t>(num_prompt_tokens));
  }
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  bool is_finished() const { return status == SequenceStatus::kFinished; }

  // Appends a sampled token and decides whether the sequence must stop:
  // kStop if it is an EOS id (unless ignore_eos) or a stop id, kLength when
  // max_tokens or max_context_length is reached, nullopt to continue.
  // Sets stop_token_id on kStop.
  std::optional<FinishReason> AppendToken(int32_t token, std::span<const int32_t> eos_token_ids,
                                          int32_t max_context_length);
};

// Blocks needed to hold `num_positions` positions.
inline int32_t NumBlocksFor(int64_t num_positions, int32_t block_size) {
  return static_cast<int32_t>((num_positions + block_size - 1) / block_size);
}

}  // namespace kvs::engine
