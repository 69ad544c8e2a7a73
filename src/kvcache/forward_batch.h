// ForwardBatch: the one description of a batch below the engine. The engine
// fills it each step (the vector keeps its capacity, so a step allocates
// nothing); the CPU runner hands it to the model unchanged, and the model
// hands it to paged attention with the batch's q / output rows.
//
// Token rows: the batch's tokens are laid out sequence after sequence, in
// `seqs` order; every [tokens, features] activation buffer follows that
// order (sequence i's rows start at the sum of the earlier sequences'
// token counts).
//
// KV layout contract: position p of a sequence lives in block
// block_table[p / block_size] at slot p % block_size (kvcache/kv_cache.h).
// Header-only: the engine (above the model) and kvcache (below it) share it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvs::kvcache {

// One sequence's part of a forward batch. The spans point into the caller's
// state and must outlive the forward call.
struct ForwardSeq {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;       // [n] tokens computed this step, n >= 1
  int32_t start_pos = 0;                 // position of tokens[0]; KV of [0, start_pos) is cached
  std::span<const int32_t> block_table;  // covers positions [0, start_pos + n)
  bool want_logits = false;              // logits of the last token are needed
  bool all_logits = false;               // logits of every token (tests, perplexity); implies want_logits
  // The sliding layers' blocks when they have their own KV group (else
  // empty): same indexing; entries wholly before the first query's window
  // (p - window + 1 for p = start_pos) may be -1 and are never read.
  std::span<const int32_t> window_block_table = {};
  // Attend every token exactly as a one-token decode of it would be
  // (speculative verification: the same numbers as decoding without it).
  bool decode_rows = false;

  int64_t NumLogits() const {
    return all_logits ? static_cast<int64_t>(tokens.size()) : (want_logits ? 1 : 0);
  }
};

struct ForwardBatch {
  std::vector<ForwardSeq> seqs;

  int64_t NumTokens() const {
    int64_t n = 0;
    for (const ForwardSeq& s : seqs) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
  // Rows of logits the forward pass writes: per sequence in order, every
  // token's (all_logits) or the last token's (want_logits).
  int64_t NumLogits() const {
    int64_t n = 0;
    for (const ForwardSeq& s : seqs) n += s.NumLogits();
    return n;
  }
};

}  // namespace kvs::kvcache
