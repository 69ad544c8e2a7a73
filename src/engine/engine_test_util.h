// Helpers for engine tests: an engine over a FakeModelRunner, stream
// draining, and an engine-free reference generator to compare outputs with.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/fake_model_runner.h"

namespace kvs::engine::testing {

struct TestEngine {
  std::unique_ptr<Engine> engine;
  FakeModelRunner* runner = nullptr;  // owned by engine
};

inline TestEngine MakeEngine(const FakeModelRunnerOptions& opts, EngineConfig config) {
  auto runner = std::make_unique<FakeModelRunner>(opts);
  TestEngine t;
  t.runner = runner.get();
  if (config.eos_token_ids.empty() && opts.eos_token_id >= 0) config.eos_token_ids = {opts.eos_token_id};
  auto e = Engine::Create(std::move(config), std::move(runner));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  t.engine = std::move(e).value();
  return t;
}

// Everything a stream delivered, merged; `num_finals` counts final chunks.
struct Collected {
  std::vector<int32_t> tokens;
  std::vector<OutputLogprobs> logprobs;
  int num_chunks = 0;
  int num_finals = 0;
  StreamChunk last;  // the final chunk when num_finals == 1
};

// Takes what is available now without waiting; call after the engine ran.
inline void TakeAvailable(RequestStream& stream, Collected& c) {
  while (true) {
    StatusOr<StreamChunk> chunk = stream.Next(std::chrono::milliseconds(0));
    if (!chunk.ok()) return;
    ++c.num_chunks;
    c.tokens.insert(c.tokens.end(), chunk->token_ids.begin(), chunk->token_ids.end());
    for (OutputLogprobs& l : chunk->logprobs) c.logprobs.push_back(std::move(l));
    if (chunk->finished()) ++c.num_finals;
    c.last = std::move(chunk).value();
  }
}

inline Collected Drain(RequestStream& stream) {
  Collected c;
  TakeAvailable(stream, c);
  return c;
}

inline void RunToCompletion(Engine& engine) {
  while (engine.Step()) {
  }
}

struct Reference {
  std::vector<int32_t> tokens;  // as the stream reports them: without the stop token
  FinishReason reason = FinishReason::kNone;
};

// What the engine must produce for this request, computed without it: the
// fake runner's logits of the full history, the same sampler, the same seed.
inline Reference ReferenceGenerate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                                   const FakeModelRunnerOptions& opts, const std::vector<int32_t>& eos,
                                   int32_t max_context_length) {
  Sequence seq(0, "reference", prompt, params);
  seq.rng.seed(params.seed.value_or(0));
  Sampler sampler(opts.vocab_size);
  std::vector<float> logits(static_cast<size_t>(opts.vocab_size));
  Reference ref;
  while (true) {
    FakeModelRunner::ReferenceLogits(seq.token_ids, opts, logits);
    const int32_t token = sampler.Sample(logits, seq).token_id;
    const std::optional<FinishReason> stop = seq.AppendToken(token, eos, max_context_length);
    if (!stop || *stop != FinishReason::kStop) ref.tokens.push_back(token);
    if (stop) {
      ref.reason = *stop;
      return ref;
    }
  }
}

// A prompt of n tokens in [1, vocab): different `salt` values give different prompts.
inline std::vector<int32_t> MakePrompt(int32_t n, uint64_t salt, int32_t vocab) {
  std::mt19937_64 rng(salt * 7919 + 17);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 1));
  return p;
}

}  // namespace kvs::engine::testing
