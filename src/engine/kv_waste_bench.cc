// KV memory waste of the paged cache under a mixed-length workload, with the
// fake runner (no model): after every engine step,
//   waste = KV slots allocated to running sequences but not (yet) written
//           / KV slots allocated (used blocks * block_size),
// summed over steps (so a long-lived state weighs by how long it lasts).
// Only the tail of each sequence's last block can be unwritten: blocks are
// allocated per chunk, never for a whole prompt or for max_tokens ahead.
// Usage: engine_kv_waste_bench [num_requests=2000] [seed=1]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/fake_model_runner.h"

namespace kvs::engine {
namespace {

// Log-uniform integer in [lo, hi].
int32_t LogUniform(std::mt19937_64& rng, int32_t lo, int32_t hi) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return static_cast<int32_t>(std::exp(std::log(lo) + u * (std::log(hi + 1.0) - std::log(lo))));
}

void Run(int32_t block_size, int num_requests, uint64_t seed) {
  FakeModelRunnerOptions opts;
  opts.vocab_size = 256;
  opts.block_size = block_size;
  opts.num_blocks = 32768 / block_size;  // 32K token slots: the pool is the bottleneck
  opts.verify_reads = false;
  EngineConfig config;
  config.max_num_batched_tokens = 2048;
  config.max_batch_size = 32;
  config.max_context_length = 8192;
  config.max_queued_requests = 1 << 20;
  config.seed = seed;
  auto engine = Engine::Create(config, std::make_unique<FakeModelRunner>(opts));
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    std::exit(1);
  }
  Engine& e = **engine;
  std::mt19937_64 rng(seed);
  std::vector<std::shared_ptr<RequestStream>> streams;
  int64_t sum_allocated = 0, sum_unwritten = 0, steps = 0, prompt_tokens = 0, output_tokens = 0;
  double peak = 0.0, sum_utilisation = 0.0;
  int submitted = 0;
  while (submitted < num_requests || e.GetStats().num_running + e.GetStats().num_waiting > 0) {
    // Keep ~64 requests in the system: the pool stays busy, some waiting.
    while (submitted < num_requests && e.GetStats().num_running + e.GetStats().num_waiting < 64) {
      Request r;
      r.prompt_token_ids.resize(static_cast<size_t>(LogUniform(rng, 16, 4096)));
      for (int32_t& t : r.prompt_token_ids) t = static_cast<int32_t>(rng() % 256);
      r.sampling.max_tokens = LogUniform(rng, 16, 1024);
      r.sampling.ignore_eos = true;
      r.sampling.temperature = 0.0f;
      prompt_tokens += static_cast<int64_t>(r.prompt_token_ids.size());
      output_tokens += r.sampling.max_tokens;
      streams.push_back(*e.Submit(std::move(r)));
      ++submitted;
    }
    e.Step();
    const EngineStats s = e.GetStats();
    if (s.kv_slots_allocated == 0) continue;
    ++steps;
    sum_allocated += s.kv_slots_allocated;
    sum_unwritten += s.kv_slots_unwritten;
    peak = std::max(peak, static_cast<double>(s.kv_slots_unwritten) / static_cast<double>(s.kv_slots_allocated));
    sum_utilisation += static_cast<double>(s.num_blocks_used) / s.num_blocks_total;
  }
  const EngineStats s = e.GetStats();
  std::printf(
      "block_size %3d: KV waste %.2f %% of allocated slots (step-averaged; worst step %.2f %%); "
      "pool use %.1f %%; %lld steps, %d requests, %.0f prompt + %.0f output tokens on average, %lld preemptions\n",
      block_size, 100.0 * static_cast<double>(sum_unwritten) / static_cast<double>(sum_allocated), 100.0 * peak,
      100.0 * sum_utilisation / static_cast<double>(steps), static_cast<long long>(steps), num_requests,
      static_cast<double>(prompt_tokens) / num_requests, static_cast<double>(output_tokens) / num_requests,
      static_cast<long long>(s.num_preemptions));
}

}  // namespace
}  // namespace kvs::engine

int main(int argc, char** argv) {
  const int num_requests = argc > 1 ? std::atoi(argv[1]) : 2000;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::printf("mixed workload: prompts log-uniform in [16, 4096], max_tokens log-uniform in [16, 1024], "
              "32K-slot pool, 2048 tokens / 32 sequences per step\n");
  for (int32_t bs : {8, 16, 32}) kvs::engine::Run(bs, num_requests, seed);
  return 0;
}
