// ModelRunner: the engine's only view of a model and its KV storage (the
// backend interface). The engine decides what to compute and which KV blocks
// hold which positions; a runner computes. A CPU runner lives in
// src/backend/cpu_runner.h; a fake one for scheduler tests in engine tests; a
// CUDA runner would be another implementation.
//
// KV layout contract: position p of a sequence lives in block
// block_table[p / block_size] at slot p % block_size. Blocks are ids in
// [0, num_blocks); the runner owns the storage for all of them.
// Thread-safety: called only from the engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace kvs::engine {

// One sequence's part of a forward batch.
struct ForwardSeq {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;       // [n] tokens computed this step
  int32_t start_pos = 0;                 // position of tokens[0]; KV of [0, start_pos) is cached
  std::span<const int32_t> block_table;  // covers positions [0, start_pos + n)
  bool want_logits = false;              // logits of the last token are needed
};

struct ForwardBatch {
  std::vector<ForwardSeq> seqs;
  int64_t NumTokens() const {
    int64_t n = 0;
    for (const ForwardSeq& s : seqs) n += static_cast<int64_t>(s.tokens.size());
    return n;
  }
  int64_t NumLogits() const {
    int64_t n = 0;
    for (const ForwardSeq& s : seqs) n += s.want_logits ? 1 : 0;
    return n;
  }
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t block_size() const = 0;
  virtual int32_t num_blocks() const = 0;
  // Computes every token of the batch, writing its K/V into the blocks, and
  // writes logits [batch.NumLogits(), vocab_size] in the order of the
  // sequences that want them.
  virtual Status Forward(const ForwardBatch& batch, std::span<float> logits) = 0;
};

}  // namespace kvs::engine
