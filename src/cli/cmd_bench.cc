// `kvserve bench --offline`: prompt-processing and generation speed of the
// raw model, like llama-bench: ppN processes N prompt tokens in one batch
// from an empty cache (or one pre-filled to --depth), tgN generates N tokens
// one at a time; each is repeated and the median tokens/s reported. As
// llama-bench does, an untimed warm-up run of the ppN test (and one token for
// tgN) comes first, so that no timed run pays for first-touch page faults of
// the KV cache and scratch buffers (--no-warmup skips it).
// `kvserve bench --url URL`: the online load benchmark against any
// OpenAI-compatible endpoint (src/bench/online_bench.h).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>

#include <filesystem>

#include "backend/load_engine.h"
#include "base/cpu.h"
#include "bench/online_bench.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "model/kv_accuracy.h"

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
  bool no_warmup = false;
  std::string kv_dtype = "f16";
  std::string dtype = "auto";
  std::vector<int> concurrency;  // non-empty: the engine's aggregate decode speed
  bool kv_accuracy = false;
  // Online (--url).
  bench::OnlineBenchOptions online;
  std::string api = "completions";
  std::vector<double> rates;
  std::string mix, multi_turn, probes;
  bool no_ignore_eos = false, no_progress = false;
  int64_t input_len = 0, output_len = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Aggregate generation speed of the serving engine (continuous batching,
// sampling, paged KV) with N sequences decoding at once. Each sequence has
// its own random -p token prompt. A first pass prefills every prompt
// (max_tokens 1, untimed); the timed pass resubmits them, so the prefix
// cache serves all full blocks and the time is almost all decode steps of
// N sequences, -n tokens each (greedy, EOS ignored).
int RunConcurrency(const BenchOptions& o, DType kv) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    std::exit(1);
  };
  // One model and one engine sized for the largest N serve every N: the
  // scheduler runs as many sequences as are submitted.
  const int max_n = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  backend::EngineSpec eo;
  eo.model_path = o.model;
  eo.model_dtype = o.dtype;
  eo.load_tokenizer = false;  // random prompts, EOS ignored
  eo.threads = o.threads;
  eo.kv_dtype = kv;
  eo.context = o.prompt + o.gen + 1;
  eo.sequences = max_n;
  eo.engine.max_num_batched_tokens = std::max(512, max_n);
  eo.engine.max_batch_size = max_n;
  eo.engine.admission_watermark = 0.0;
  auto eng = backend::LoadEngine(eo);
  if (!eng.ok()) fail(eng.status());
  const int32_t vocab = eng->model.vocab;
  engine::Engine& e = *eng->engine;
  if (Status s = e.Start(); !s.ok()) fail(s);
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(max_n));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(std::max(o.prompt, 1)));
    for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  }
  // Runs the first n prompts at once; returns the tokens they generated.
  auto pass = [&](int n, int max_tokens) -> int64_t {
    std::vector<std::shared_ptr<engine::RequestStream>> streams;
    for (int i = 0; i < n; ++i) {
      engine::Request r;
      r.prompt_token_ids = prompts[static_cast<size_t>(i)];
      r.sampling.temperature = 0;
      r.sampling.max_tokens = max_tokens;
      r.sampling.ignore_eos = true;
      auto st = e.Submit(std::move(r));
      if (!st.ok()) fail(st.status());
      streams.push_back(std::move(*st));
    }
    int64_t tokens = 0;
    for (auto& st : streams) {
      for (;;) {
        auto c = st->Next();
        if (!c.ok()) fail(c.status());
        tokens += static_cast<int64_t>(c->token_ids.size());
        if (c->finished()) break;
      }
    }
    return tokens;
  };
  std::printf("# aggregate generation, prompt %d tokens (cached), %d generated per sequence\n", o.prompt, o.gen);
  for (int n : o.concurrency) {
    pass(n, 1);  // prefill: the timed passes find the prompts in the prefix cache
    std::vector<double> tps;
    for (int r = 0; r < o.reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t tokens = pass(n, o.gen);
      tps.push_back(static_cast<double>(tokens) /
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("tg%d x%d: %.2f\n", o.gen, n, Median(tps));
    std::fflush(stdout);
  }
  e.Stop();
  return 0;
}

// Logit deviation and greedy agreement of each KV dtype against f32 K/V on
// a -p token random prompt, then -n greedy tokens.
int RunKvAccuracy(const BenchOptions& o) {
  backend::EngineSpec spec;
  spec.model_path = o.model;
  spec.model_dtype = o.dtype;
  spec.load_tokenizer = false;
  spec.assemble_engine = false;  // the model itself, run under each KV dtype
  auto loaded = backend::LoadEngine(spec);
  if (!loaded.ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  model::LlamaModel& weights = *loaded->weights;
  ThreadPool pool(o.threads);
  std::mt19937 rng(42);
  std::vector<int32_t> prompt(static_cast<size_t>(std::max(o.prompt, 1)));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(weights.config().vocab));
  const DType dtypes[] = {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1};
  auto r = model::MeasureKvAccuracy(weights, prompt, dtypes, 512, o.gen, pool);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().ToString().c_str());
    return 1;
  }
  std::printf("| kv dtype | positions | max abs logit dev | mean abs logit dev | max abs logit | argmax agreement | greedy identical |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const auto& a : *r) {
    std::printf("| %s | %lld | %.5f | %.6f | %.2f | %.2f %% | %d/%d |\n", DTypeName(a.dtype),
                static_cast<long long>(a.positions), a.max_abs_logit_dev, a.mean_abs_logit_dev, a.max_abs_logit,
                100.0 * a.argmax_agreement, a.greedy_identical_prefix, a.greedy_tokens);
  }
  return 0;
}

// Online mode: the flags become an OnlineBenchOptions.
int RunOnline(BenchOptions o) {
  bench::OnlineBenchOptions& on = o.online;
  bench::WorkloadSpec& s = on.spec;
  if (o.api == "chat") {
    s.api = bench::ApiKind::kChat;
  } else if (o.api != "completions") {
    std::fprintf(stderr, "error: --api must be completions or chat\n");
    return 2;
  }
  s.concurrency = o.concurrency;
  s.rates = o.rates;
  s.input_len = o.input_len > 0 ? o.input_len : o.prompt;
  s.output_len = o.output_len > 0 ? o.output_len : o.gen;
  s.ignore_eos = !o.no_ignore_eos;
  if (!o.mix.empty()) {
    auto m = bench::ParseMix(o.mix);
    if (!m.ok()) {
      std::fprintf(stderr, "error: --mix: %s\n", m.status().message().c_str());
      return 2;
    }
    s.mix = *m;
  }
  if (!o.multi_turn.empty()) {
    auto m = bench::ParseMultiTurn(o.multi_turn);
    if (!m.ok()) {
      std::fprintf(stderr, "error: --multi-turn: %s\n", m.status().message().c_str());
      return 2;
    }
    s.multi_turn = *m;
    s.api = bench::ApiKind::kChat;
  }
  if (!o.probes.empty()) {
    auto p = bench::ParseProbes(o.probes);
    if (!p.ok()) {
      std::fprintf(stderr, "error: --probes: %s\n", p.status().message().c_str());
      return 2;
    }
    s.probes = *p;
  }
  // -m names the model: a GGUF file gives the local tokenizer, anything
  // else is the served model id.
  if (!o.model.empty()) {
    if (std::filesystem::is_regular_file(o.model)) {
      if (on.tokenizer.empty()) on.tokenizer = o.model;
    } else if (on.model.empty()) {
      on.model = o.model;
    }
  }
  on.progress = !o.no_progress;
  return bench::RunOnlineBench(on);
}

int RunBench(const BenchOptions& o) {
  if (!o.online.url.empty()) return RunOnline(o);
  if (o.model.empty()) {
    std::fprintf(stderr, "error: --model FILE.gguf is required (or --url URL for the online benchmark)\n");
    return 2;
  }
  if (o.kv_accuracy) return RunKvAccuracy(o);
  if (!o.offline) {
    std::fprintf(stderr, "error: only --offline benchmarks exist so far (the load benchmark comes with the server)\n");
    return 2;
  }
  auto kv = DTypeFromName(o.kv_dtype);
  if (!kv) {
    std::fprintf(stderr, "error: unknown --kv-dtype '%s'\n", o.kv_dtype.c_str());
    return 2;
  }
  if (!o.concurrency.empty()) return RunConcurrency(o, *kv);
  backend::EngineSpec spec;
  spec.model_path = o.model;
  spec.model_dtype = o.dtype;
  spec.load_tokenizer = false;
  spec.assemble_engine = false;  // a runner driven directly, one sequence
  spec.threads = o.threads;
  auto loaded = backend::LoadEngine(spec);
  if (!loaded.ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const model::ModelConfig cfg = loaded->model;
  const int64_t max_pos = static_cast<int64_t>(o.depth) + std::max(o.prompt, o.gen) + 16;
  backend::RunnerOptions ro;
  ro.threads = o.threads;
  ro.block_size = 16;
  ro.num_blocks = static_cast<int32_t>(max_pos / 16 + 2);
  ro.kv_dtype = *kv;
  ro.max_batch_tokens = std::max({o.prompt, o.depth > 0 ? std::min(o.depth, 512) : 1, 1});
  if (Status s = backend::MakeRunner(spec, ro, &*loaded); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  engine::ModelRunner& runner = *loaded->runner;
  std::fprintf(stderr, "model: %s\ncpu: %s, threads %d, kv %s\n", cfg.Describe().c_str(),
               GetCpuFeatures().Describe().c_str(), loaded->threads, o.kv_dtype.c_str());
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
  if (!o.no_warmup) {
    // The KV pages of the tested positions and the batch-sized scratch are
    // first written here, not in the first timed run (the timed runs write
    // the same positions again).
    if (o.prompt > 0) forward(tokens.data(), o.prompt, o.depth);
    forward(tokens.data(), 1, o.depth);
  }
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

void AddOnlineOptions(CLI::App* app, BenchOptions* o) {
  bench::OnlineBenchOptions& on = o->online;
  const char* g = "Online (--url)";
  on.spec.seed = 0;  // random unless given
  app->add_option("--url", on.url, "Load-test this OpenAI-compatible endpoint (http://host:port[/v1])")->group(g);
  app->add_option("--api-key", on.api_key, "Bearer key for the endpoint")->envname("KVSERVE_API_KEY")->group(g);
  app->add_option("--served-model-name", on.model, "Model id to request (default: the endpoint's first)")->group(g);
  app->add_option("--tokenizer", on.tokenizer,
                  "GGUF file whose tokenizer counts prompt tokens (default: the endpoint's /tokenize)")
      ->group(g);
  app->add_option("--api", o->api, "completions or chat")->group(g);
  app->add_option("--rate", o->rates, "Poisson arrivals at these request rates (a sweep), e.g. 1,2,4")
      ->delimiter(',')
      ->group(g);
  app->add_option("--max-concurrency", on.spec.max_concurrency, "Cap on requests in flight for --rate runs")->group(g);
  app->add_option("--num-requests", on.spec.num_requests, "Requests per run (default: 4 x concurrency, >= 16)")
      ->group(g);
  app->add_option("--duration", on.spec.duration_seconds, "Stop sending after this many seconds per run")->group(g);
  app->add_option("--input-len", o->input_len, "Prompt tokens per request (default: -p)")->group(g);
  app->add_option("--input-lengths", on.spec.input_lengths_text,
                  "One run per input length: FROM:TO doubling (TO may be 'max': the context minus the output) or a "
                  "list")
      ->group(g);
  app->add_option("--output-len", o->output_len, "Generated tokens per request (default: -n)")->group(g);
  app->add_option("--mix", o->mix, "Input lengths drawn per request, LENGTH:WEIGHT,... e.g. 256:0.8,4096:0.2")
      ->group(g);
  app->add_option("--multi-turn", o->multi_turn,
                  "Shared-prefix conversations CONVERSATIONS:TURNS[:SYSTEM_TOKENS] whose history grows (chat API)")
      ->group(g);
  app->add_flag("--no-ignore-eos", o->no_ignore_eos, "Let answers end early (default: ignore_eos, exact lengths)")
      ->group(g);
  app->add_option("--probes", o->probes,
                  "Requests whose answers are checked, KIND:SHARE,... with KIND arithmetic, json, recall (multi-turn), "
                  "over-length or malformed, e.g. arithmetic:0.1,json:0.05,malformed:0.05")
      ->group(g);
  app->add_option("--answers-min", on.checks.answers_min,
                  "Check: the share of right answers each probe kind needs (arithmetic, json, recall)")
      ->check(CLI::Range(0.0, 1.0))
      ->group(g);
  app->add_option("--dataset", on.spec.dataset,
                  "Prompts and answer lengths from a ShareGPT / OpenAI-messages file, or a timed trace (timestamp, "
                  "input_length, output_length), JSON or JSON Lines")
      ->group(g);
  app->add_option("--input-stddev", on.spec.input_stddev, "Input lengths drawn from normal(input-len, this)")
      ->group(g);
  app->add_option("--output-stddev", on.spec.output_stddev, "Output lengths drawn from normal(output-len, this)")
      ->group(g);
  app->add_option("--burstiness", on.spec.burstiness,
                  "Rate runs: gamma-distributed gaps of this shape (1: Poisson; < 1 burstier)")
      ->group(g);
  app->add_option("--ramp-up", on.spec.ramp_up_seconds, "Rate runs: the rate rises linearly from 0 over these seconds")
      ->group(g);
  app->add_option("--percentiles", on.checks.percentiles, "Report these percentiles too, e.g. 95,99.9")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 100.0))
      ->group(g);
  app->add_option("--text", on.spec.text, "Prompt text: prose, filler or a text file")->group(g);
  app->add_option("--seed", on.spec.seed, "Seed for prompts and arrivals (default: random, printed)")->group(g);
  app->add_option("--workload", on.workload_file, "YAML workload file (runs: [...]; see docs/validation.md)")
      ->group(g);
  app->add_option("--slo", on.slos, "SLO for goodput, e.g. ttft:2s@4096 or tpot:100ms (repeatable)")->group(g);
  app->add_option("--kv-watermark-max", on.checks.kv_watermark_max, "Check: peak KV use at most this fraction")
      ->check(CLI::Range(0.0, 1.0))
      ->group(g);
  app->add_option("--max-preemptions-per-minute", on.checks.preemptions_per_minute_max, "Check: preemption rate")
      ->group(g);
  app->add_option("--ttft-jump-max", on.checks.ttft_jump_max,
                  "Check: TTFT growth between neighbouring lengths, relative to the input's growth")
      ->group(g);
  app->add_option("--warmup", on.warmup, "Warm-up requests before the first run")->group(g);
  app->add_option("--metrics-interval", on.metrics_interval, "Seconds between /metrics samples (0: off)")->group(g);
  app->add_option("--replica-metrics", on.replica_metrics,
                  "Read server figures (KV peak gauges, RSS, memory plan) from these replicas' /metrics instead of "
                  "the endpoint's: the replicas behind a gateway (http://HOST:PORT, repeatable)")
      ->group(g);
  app->add_option("--memory-ratio-max", on.checks.memory_ratio_max,
                  "Check: each server's resident memory at most this multiple of its memory plan")
      ->check(CLI::PositiveNumber)
      ->group(g);
  app->add_option("--request-timeout", on.request_timeout, "Seconds before a request is given up")->group(g);
  app->add_option("--json", on.json_path, "Write the report (every request's timings) as JSON")->group(g);
  app->add_option("--html", on.html_path, "Write a self-contained HTML report")->group(g);
  app->add_option("--svg-dir", on.svg_dir, "Also write each chart as an SVG file in this directory")->group(g);
  app->add_flag("--no-progress", o->no_progress, "No progress bar")->group(g);
}

const Registrar kRegister_bench({"bench",
              "Measure prompt processing and generation speed (llama-bench style), or load-test an endpoint (--url)",
              [](CLI::App* app) {
                 auto o = std::make_shared<BenchOptions>();
                 app->add_option("-m,--model", o->model,
                                 "GGUF model file (offline); with --url: a GGUF file for token counts or the served "
                                 "model id");
                 app->add_flag("--offline", o->offline, "Benchmark the model directly, without the server");
                 app->add_option("-p,--n-prompt", o->prompt, "Prompt tokens per ppN test (0 skips)");
                 app->add_option("-n,--n-gen", o->gen, "Generated tokens per tgN test (0 skips)");
                 app->add_option("-t,--threads", o->threads, "Threads (0: all cores)");
                 app->add_option("-r,--repetitions", o->reps, "Repetitions (median reported)")->check(CLI::PositiveNumber);
                 app->add_option("-d,--depth", o->depth, "KV cache depth (tokens already cached) for the tests");
                 app->add_flag("--no-warmup", o->no_warmup,
                               "Skip the untimed warm-up runs (one of the ppN test, one token for tgN)");
                 app->add_option("--kv-dtype", o->kv_dtype, "KV cache dtype: f32, f16, bf16, q8_0, q4_0, q4_1");
                 AddDtypeOption(app, &o->dtype);
                 app->add_option("-c,--concurrency", o->concurrency,
                                 "Sequences decoding at once through the engine, e.g. 1,4,16,64: prints the aggregate "
                                 "generation tokens/s (tgN xC) instead of ppN/tgN; with --url: requests in flight "
                                 "(closed loop; a list is a sweep)")
                     ->delimiter(',')
                     ->check(CLI::Range(1, 4096));
                 app->add_flag("--kv-accuracy", o->kv_accuracy,
                               "Instead of speed: logit deviation and greedy agreement of f16/bf16/q8_0/q4_0/q4_1 K/V against "
                               "f32 on a -p token prompt and -n greedy tokens");
                 AddOnlineOptions(app, o.get());
                 return [o] { return RunBench(*o); };
               }});

}  // namespace
}  // namespace kvs::cli
