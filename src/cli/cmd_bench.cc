// `kvserve bench --offline`: prompt-processing and generation speed of the
// raw model, like llama-bench: ppN processes N prompt tokens in one batch
// from an empty cache (or one pre-filled to --depth), tgN generates N tokens
// one at a time; each is repeated and the median tokens/s reported.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include "backend/cpu_runner.h"
#include "base/cpu.h"
#include "cli/command.h"

namespace kvs::cli {
namespace {

struct BenchOptions {
  std::string model;
  bool offline = false;
  int prompt = 512;
  int gen = 128;
  int threads = 0;
  int reps = 5;
  int depth = 0;
  std::string kv_dtype = "f16";
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int RunBench(const BenchOptions& o) {
  if (!o.offline) {
    std::fprintf(stderr, "error: only --offline benchmarks exist so far (the load benchmark comes with the server)\n");
    return 2;
  }
  auto kv = DTypeFromName(o.kv_dtype);
  if (!kv) {
    std::fprintf(stderr, "error: unknown --kv-dtype '%s'\n", o.kv_dtype.c_str());
    return 2;
  }
  auto model = model::LlamaModel::Load(o.model);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().ToString().c_str());
    return 1;
  }
  const model::ModelConfig cfg = (*model)->config();
  const int64_t max_pos = static_cast<int64_t>(o.depth) + std::max(o.prompt, o.gen) + 16;
  backend::CpuRunnerOptions ro;
  ro.threads = o.threads;
  ro.block_size = 16;
  ro.num_blocks = static_cast<int32_t>(max_pos / 16 + 2);
  ro.kv_dtype = *kv;
  ro.max_batch_tokens = std::max({o.prompt, o.depth > 0 ? std::min(o.depth, 512) : 1, 1});
  auto runner_or = backend::CpuRunner::Create(std::move(*model), ro);
  if (!runner_or.ok()) {
    std::fprintf(stderr, "error: %s\n", runner_or.status().ToString().c_str());
    return 1;
  }
  backend::CpuRunner& runner = **runner_or;
  std::fprintf(stderr, "model: %s\ncpu: %s, threads %d, kv %s\n", cfg.Describe().c_str(),
               GetCpuFeatures().Describe().c_str(), runner.pool().size(), o.kv_dtype.c_str());
  std::vector<int32_t> table(static_cast<size_t>(ro.num_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::mt19937 rng(42);
  std::vector<int32_t> tokens(static_cast<size_t>(std::max({o.prompt, o.depth, o.gen}) + 1));
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(cfg.vocab));
  std::vector<float> logits(static_cast<size_t>(cfg.vocab));

  auto forward = [&](const int32_t* toks, int n, int start) {
    engine::ForwardBatch b;
    b.seqs.push_back({0, std::span<const int32_t>(toks, static_cast<size_t>(n)), start, table, true});
    Status s = runner.Forward(b, logits);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  // Fill the cache to --depth (not timed), in chunks.
  auto fill_depth = [&] {
    for (int p = 0; p < o.depth;) {
      const int n = std::min(o.depth - p, static_cast<int>(ro.max_batch_tokens));
      forward(tokens.data() + p % (tokens.size() - n), n, p);
      p += n;
    }
  };
  using Clock = std::chrono::steady_clock;
  fill_depth();
  forward(tokens.data(), 1, o.depth);  // warm-up
  const std::string depth_suffix = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
  if (o.prompt > 0) {
    std::vector<double> tps;
    for (int r = 0; r < o.reps; ++r) {
      auto t0 = Clock::now();
      forward(tokens.data(), o.prompt, o.depth);
      tps.push_back(o.prompt / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("pp%d%s: %.2f\n", o.prompt, depth_suffix.c_str(), Median(tps));
    std::fflush(stdout);
  }
  if (o.gen > 0) {
    std::vector<double> tps;
    for (int r = 0; r < o.reps; ++r) {
      auto t0 = Clock::now();
      for (int i = 0; i < o.gen; ++i) forward(tokens.data() + i, 1, o.depth + i);
      tps.push_back(o.gen / std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::printf("tg%d%s: %.2f\n", o.gen, depth_suffix.c_str(), Median(tps));
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak_rss_mib: %.1f\n", ru.ru_maxrss / 1024.0);
  return 0;
}

Registrar reg({"bench", "Measure prompt processing and generation speed (llama-bench style)", [](CLI::App* app) {
                 auto o = std::make_shared<BenchOptions>();
                 app->add_option("-m,--model", o->model, "GGUF model file")->required();
                 app->add_flag("--offline", o->offline, "Benchmark the model directly, without the server");
                 app->add_option("-p,--n-prompt", o->prompt, "Prompt tokens per ppN test (0 skips)");
                 app->add_option("-n,--n-gen", o->gen, "Generated tokens per tgN test (0 skips)");
                 app->add_option("-t,--threads", o->threads, "Threads (0: all cores)");
                 app->add_option("-r,--repetitions", o->reps, "Repetitions (median reported)")->check(CLI::PositiveNumber);
                 app->add_option("-d,--depth", o->depth, "KV cache depth (tokens already cached) for the tests");
                 app->add_option("--kv-dtype", o->kv_dtype, "KV cache dtype: f32, f16, bf16, q8_0");
                 return [o] { return RunBench(*o); };
               }});

}  // namespace
}  // namespace kvs::cli
