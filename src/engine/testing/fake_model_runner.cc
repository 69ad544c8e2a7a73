#include "engine/testing/fake_model_runner.h"

#include <unordered_set>

namespace kvs::engine {
namespace {

constexpr uint64_t kRoot = 0x243f6a8885a308d3ULL;

// A 64-bit finaliser (splitmix-style): good avalanche for test purposes.
uint64_t Avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

FakeModelRunner::FakeModelRunner(const FakeModelRunnerOptions& options)
    : options_(options),
      slots_(static_cast<size_t>(options.num_blocks) * static_cast<size_t>(options.block_size)),
      dirty_(static_cast<size_t>(options.num_blocks), 0),
      window_slots_(options.window > 0 ? static_cast<size_t>(options.num_window_blocks) * options.block_size : 0) {}

uint64_t FakeModelRunner::Mix(uint64_t chain, int32_t token) {
  return Avalanche(chain ^ Avalanche(static_cast<uint64_t>(token) + 0x9e3779b97f4a7c15ULL));
}

void FakeModelRunner::LogitsFromChain(uint64_t chain, int32_t last_token, const FakeModelRunnerOptions& options,
                                      std::span<float> logits) {
  for (int32_t v = 0; v < options.vocab_size; ++v) {
    const uint64_t r = Avalanche(chain + static_cast<uint64_t>(v) * 0x632be59bd9b4e019ULL);
    // Uniform in [-4, 4).
    logits[static_cast<size_t>(v)] = static_cast<float>(static_cast<double>(r >> 11) * 0x1.0p-53 * 8.0 - 4.0);
  }
  if (options.eos_token_id >= 0) logits[static_cast<size_t>(options.eos_token_id)] += options.eos_logit_bias;
  if (options.follow_bias != 0.0f && last_token >= 0) {
    logits[static_cast<size_t>((last_token + 1) % options.vocab_size)] += options.follow_bias;
  }
}

void FakeModelRunner::ReferenceLogits(std::span<const int32_t> history, const FakeModelRunnerOptions& options,
                                      std::span<float> logits) {
  uint64_t chain = kRoot;
  for (int32_t t : history) chain = Mix(chain, t);
  LogitsFromChain(chain, history.empty() ? -1 : history.back(), options, logits);
}

Status FakeModelRunner::Forward(const ForwardBatch& batch, std::span<float> logits) {
  if (on_forward) on_forward(batch);
  if (fail_after_calls == 0) return Internal("fake runner: injected failure");
  if (fail_after_calls > 0) --fail_after_calls;
  const auto vocab = static_cast<size_t>(options_.vocab_size);
  if (logits.size() != static_cast<size_t>(batch.NumLogits()) * vocab) {
    return Internal("fake runner: logits span holds {} floats, expected {} x {}", logits.size(), batch.NumLogits(),
                    vocab);
  }
  std::unordered_set<int64_t> seen;
  size_t row = 0;
  for (const ForwardSeq& s : batch.seqs) {
    if (!seen.insert(s.seq_id).second) return Internal("fake runner: sequence {} twice in a batch", s.seq_id);
    std::span<float> out;  // [NumLogits, vocab]
    const auto rows = static_cast<size_t>(s.NumLogits());
    if (rows > 0) out = logits.subspan(row * vocab, rows * vocab);
    row += rows;
    KVS_RETURN_IF_ERROR(RunSeq(s, out));
  }
  ++num_forward_calls_;
  num_tokens_computed_ += batch.NumTokens();
  max_tokens_in_batch_ = std::max(max_tokens_in_batch_, batch.NumTokens());
  return Status::Ok();
}

void FakeModelRunner::ReleaseBlocks(std::span<const int32_t> block_ids) {
  const auto bs = static_cast<size_t>(options_.block_size);
  for (int32_t b : block_ids) {
    KVS_CHECK(b >= 0 && b < options_.num_blocks);
    for (size_t i = 0; i < bs; ++i) slots_[static_cast<size_t>(b) * bs + i] = Slot{};
    uint8_t& dirty = dirty_[static_cast<size_t>(b)];
    num_dirty_blocks_ -= dirty;
    dirty = 0;
    ++num_blocks_released_;
  }
}

void FakeModelRunner::ReleaseWindowBlocks(std::span<const int32_t> block_ids) {
  const auto bs = static_cast<size_t>(options_.block_size);
  for (int32_t b : block_ids) {
    KVS_CHECK(b >= 0 && b < options_.num_window_blocks);
    for (size_t i = 0; i < bs; ++i) window_slots_[static_cast<size_t>(b) * bs + i] = Slot{};
  }
}

Status FakeModelRunner::CheckWindow(const ForwardSeq& s, std::span<const uint64_t> chain_at) const {
  const int32_t bs = options_.block_size;
  for (int32_t p = std::max(0, s.start_pos - options_.window + 1); p < s.start_pos; ++p) {
    const int32_t block = s.window_block_table[static_cast<size_t>(p / bs)];
    if (block < 0 || block >= options_.num_window_blocks) {
      return Internal("fake runner: sequence {} reads position {} through window block id {}", s.seq_id, p, block);
    }
    const Slot& kv = window_slots_[static_cast<size_t>(block) * bs + static_cast<size_t>(p % bs)];
    if (kv.position != p || (!chain_at.empty() && kv.chain != chain_at[static_cast<size_t>(p)])) {
      return Internal("fake runner: sequence {} reads position {} from window block {}, which holds position {} "
                      "(or another history)", s.seq_id, p, block, kv.position);
    }
  }
  return Status::Ok();
}

Status FakeModelRunner::RunSeq(const ForwardSeq& s, std::span<float> logits) {
  const int32_t bs = options_.block_size;
  const auto n = static_cast<int32_t>(s.tokens.size());
  if (n == 0) return Internal("fake runner: sequence {} has no tokens", s.seq_id);
  if (static_cast<int64_t>(s.block_table.size()) * bs < static_cast<int64_t>(s.start_pos) + n) {
    return Internal("fake runner: sequence {}: {} blocks cannot hold positions up to {}", s.seq_id,
                    s.block_table.size(), s.start_pos + n);
  }
  const auto slot_of = [&](int32_t pos) -> StatusOr<size_t> {
    const int32_t block = s.block_table[static_cast<size_t>(pos / bs)];
    if (block < 0 || block >= options_.num_blocks) {
      return Internal("fake runner: sequence {}: block id {} out of range", s.seq_id, block);
    }
    return static_cast<size_t>(block) * static_cast<size_t>(bs) + static_cast<size_t>(pos % bs);
  };
  const bool windowed = options_.window > 0;
  if (windowed && s.window_block_table.size() != s.block_table.size()) {
    return Internal("fake runner: sequence {}: window table has {} entries, block table {}", s.seq_id,
                    s.window_block_table.size(), s.block_table.size());
  }
  // Read the cached history.
  uint64_t chain = kRoot;
  chain_at_.clear();
  if (s.start_pos > 0) {
    const int32_t first = options_.verify_reads ? 0 : s.start_pos - 1;
    for (int32_t p = first; p < s.start_pos; ++p) {
      KVS_ASSIGN_OR_RETURN(const size_t slot, slot_of(p));
      const Slot& kv = slots_[slot];
      if (kv.position != p) {
        return Internal("fake runner: sequence {} reads position {} from slot {} which holds position {}", s.seq_id,
                        p, slot, kv.position);
      }
      if (options_.verify_reads && kv.chain != Mix(chain, kv.token)) {
        return Internal("fake runner: sequence {} reads position {} from slot {} written by another history",
                        s.seq_id, p, slot);
      }
      chain = kv.chain;
      if (windowed && options_.verify_reads) chain_at_.push_back(chain);
    }
  }
  if (windowed) KVS_RETURN_IF_ERROR(CheckWindow(s, chain_at_));
  // Write the new tokens.
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = s.start_pos + i;
    KVS_ASSIGN_OR_RETURN(const size_t slot, slot_of(p));
    const int32_t token = s.tokens[static_cast<size_t>(i)];
    if (token < 0 || token >= options_.vocab_size) return Internal("fake runner: token {} out of range", token);
    chain = Mix(chain, token);
    slots_[slot] = {p, token, chain};
    if (s.all_logits) {
      const auto vocab = static_cast<size_t>(options_.vocab_size);
      LogitsFromChain(chain, token, options_, logits.subspan(static_cast<size_t>(i) * vocab, vocab));
    }
    if (windowed) {
      const int32_t wb = s.window_block_table[static_cast<size_t>(p / bs)];
      if (wb < 0 || wb >= options_.num_window_blocks) {
        return Internal("fake runner: sequence {} writes position {} to window block id {}", s.seq_id, p, wb);
      }
      window_slots_[static_cast<size_t>(wb) * bs + static_cast<size_t>(p % bs)] = {p, token, chain};
    }
    uint8_t& dirty = dirty_[slot / static_cast<size_t>(bs)];
    num_dirty_blocks_ += dirty == 0;
    dirty = 1;
  }
  if (s.want_logits && !s.all_logits) LogitsFromChain(chain, s.tokens.back(), options_, logits);
  return Status::Ok();
}

}  // namespace kvs::engine
