// CPU cost of sampling one token at a real vocabulary size (Qwen2's 151936),
// for the common parameter sets. Logits are Gaussian (std 3), a distribution
// with a long tail, which is the expensive case for top-p. Reports thread
// CPU time per token.
// Usage: engine_sampler_bench [vocab=151936]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace kvs::engine {
namespace {

// CPU time of this thread: the machines are shared, wall time is not the cost.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void Bench(const char* name, const SamplingParams& p, int32_t vocab, int32_t history) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> logits(8, std::vector<float>(static_cast<size_t>(vocab)));
  for (auto& l : logits) {
    for (float& x : l) x = normal(rng);
  }
  std::vector<int32_t> prompt(static_cast<size_t>(history));
  for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  Sequence seq(0, "bench", prompt, p);
  seq.rng.seed(7);
  Sampler sampler(vocab);
  const int iters = 200;
  int64_t sink = 0;
  const double start = ThreadCpuSeconds();
  for (int i = 0; i < iters; ++i) sink += sampler.Sample(logits[static_cast<size_t>(i % 8)], seq).token_id;
  const double us = (ThreadCpuSeconds() - start) * 1e6 / iters;
  std::printf("  %-44s %8.1f us/token  (checksum %lld)\n", name, us, static_cast<long long>(sink % 1000));
}

}  // namespace
}  // namespace kvs::engine

int main(int argc, char** argv) {
  using kvs::engine::SamplingParams;
  const int32_t vocab = argc > 1 ? std::atoi(argv[1]) : 151936;
  std::printf("sampler, vocab %d, one sequence, single thread:\n", vocab);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  kvs::engine::Bench("greedy", greedy, vocab, 16);
  SamplingParams temp;
  kvs::engine::Bench("temperature 1", temp, vocab, 16);
  SamplingParams top_k = temp;
  top_k.top_k = 40;
  kvs::engine::Bench("temperature 1, top_k 40", top_k, vocab, 16);
  SamplingParams top_p = temp;
  top_p.top_p = 0.9f;
  kvs::engine::Bench("temperature 1, top_p 0.9", top_p, vocab, 16);
  SamplingParams all = top_p;
  all.top_k = 50;
  all.min_p = 0.05f;
  all.repetition_penalty = 1.1f;
  all.frequency_penalty = 0.2f;
  kvs::engine::Bench("top_k 50, top_p 0.9, min_p, penalties, 4K ctx", all, vocab, 4096);
  SamplingParams lp = greedy;
  lp.logprobs = 5;
  kvs::engine::Bench("greedy + logprobs 5", lp, vocab, 16);
  return 0;
}
