// `kvserve perplexity -m MODEL -f TEXT [-c CTX] [--chunks N] [-b N] [-t N]`:
// the perplexity of a model on a text file by llama-perplexity's method and
// output (bench/perplexity.h), to check quantisations, KV dtypes and
// architectures against llama.cpp. stdout gets the running estimate after
// each window, `[1]x,[2]y,...`, then `Final estimate: PPL = <ppl> +/- <err>`;
// setup and speed go to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "backend/load_engine.h"
#include "bench/perplexity.h"
#include "cli/command.h"
#include "cli/default_model.h"
#include "tokenizer/tokenizer.h"

namespace kvs::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string file;
  int ctx = 0;  // 0: llama-perplexity's 512, or the model's context when that is smaller
  int chunks = -1;
  int batch = 2048;
  int threads = 0;
  std::string kv_dtype = "f16";
  std::string dtype = "auto";
};

int PerplexityFail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open the text file '{}'", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return InvalidArgument("cannot read the text file '{}'", path);
  return ss.str();
}

int RunPerplexity(PerplexityArgs a) {
  using Clock = std::chrono::steady_clock;
  if (a.file.empty()) return PerplexityFail(InvalidArgument("-f TEXT is required"));
  if (a.model.empty()) a.model = DefaultModelPath();
  if (a.model.empty()) {
    std::fprintf(stderr, "error: %s\n", kNoModelMessage);
    return 1;
  }
  auto kv = DTypeFromName(a.kv_dtype);
  if (!kv) return PerplexityFail(InvalidArgument("unknown --kv-dtype '{}' (f32, f16, bf16, q8_0, q4_0, q4_1)", a.kv_dtype));
  auto text = ReadTextFile(a.file);
  if (!text.ok()) return PerplexityFail(text.status());
  backend::EngineSpec spec;
  spec.model_path = a.model;
  spec.model_dtype = a.dtype;
  spec.assemble_engine = false;  // a runner driven directly (MakeRunner below)
  spec.threads = a.threads;
  auto loaded = backend::LoadEngine(spec);
  if (!loaded.ok()) return PerplexityFail(loaded.status());
  const std::unique_ptr<tok::Tokenizer>& tok = loaded->tokenizer;
  const model::ModelConfig cfg = loaded->model;

  // As llama.cpp's -f: one final newline is not part of the text.
  if (!text->empty() && text->back() == '\n') text->pop_back();
  const auto t0 = Clock::now();
  // As llama-perplexity: the whole file at once, BOS first when the vocabulary
  // adds one, control-token text taken literally.
  const std::vector<int32_t> tokens = tok->Encode(*text, /*add_special=*/true, /*parse_special=*/false);
  const double tokenize_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  bench::PerplexityOptions po;
  po.ctx = a.ctx > 0 ? a.ctx : (cfg.context_length > 0 ? std::min(512, cfg.context_length) : 512);
  po.batch = a.batch;
  po.max_chunks = a.chunks;
  po.bos_id = tok->add_bos() ? tok->bos_id() : -1;
  auto n_chunks = bench::PerplexityChunks(static_cast<int64_t>(tokens.size()), po, cfg.context_length);
  if (!n_chunks.ok()) return PerplexityFail(n_chunks.status());

  backend::RunnerOptions ro;
  ro.threads = a.threads;
  ro.block_size = 16;
  ro.num_blocks = (po.ctx + ro.block_size - 1) / ro.block_size;
  ro.kv_dtype = *kv;
  ro.max_batch_tokens = std::min(po.batch, po.ctx);
  if (Status s = backend::MakeRunner(spec, ro, &*loaded); !s.ok()) return PerplexityFail(s);
  std::fprintf(stderr,
               "kvserve perplexity: %s\nmodel: %s\n%zu tokens (tokenized in %.1f ms); %d chunks of %d tokens, "
               "batch %d, threads %d, kv %s\n",
               a.model.c_str(), cfg.Describe().c_str(), tokens.size(), tokenize_ms, *n_chunks, po.ctx,
               static_cast<int>(ro.max_batch_tokens), loaded->threads, a.kv_dtype.c_str());

  const auto t_eval = Clock::now();
  auto est = bench::EvaluatePerplexity(*loaded->runner, tokens, po, [](const bench::PerplexityEstimate& e) {
    std::printf("[%d]%.4f,", e.chunks, e.Ppl());
    std::fflush(stdout);
  });
  std::printf("\n");
  if (!est.ok()) return PerplexityFail(est.status());
  const double eval_s = std::chrono::duration<double>(Clock::now() - t_eval).count();
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", est->Ppl(), est->PplError());
  std::fprintf(stderr, "%d chunks, %lld tokens scored, %.2f s (%.1f tokens/s evaluated)\n", est->chunks,
               static_cast<long long>(est->count), eval_s,
               eval_s > 0 ? static_cast<double>(est->chunks) * po.ctx / eval_s : 0.0);
  return 0;
}

const Registrar kRegister_perplexity(
    {"perplexity", "Perplexity of a model on a text file (llama-perplexity's method)", [](CLI::App* app) {
       auto a = std::make_shared<PerplexityArgs>();
       app->add_option("-m,--model", a->model, "GGUF model file (default: the bundled model)");
       app->add_option("-f,--file", a->file, "Text file to score (tokenized whole, BOS first)");
       app->add_option("-c,--ctx-size", a->ctx, "Tokens per window (0: 512, or the model's context if smaller)")
           ->check(CLI::NonNegativeNumber);
       app->add_option("--chunks", a->chunks, "Windows to evaluate (-1: all)");
       app->add_option("-b,--batch-size", a->batch, "Most tokens per forward pass")->check(CLI::PositiveNumber);
       app->add_option("-t,--threads", a->threads, "Threads (0: all cores)")->check(CLI::NonNegativeNumber);
       app->add_option("--kv-dtype", a->kv_dtype, "KV cache dtype: f32, f16, bf16, q8_0, q4_0, q4_1");
       AddDtypeOption(app, &a->dtype);
       return [a] { return RunPerplexity(*a); };
     }});

}  // namespace
}  // namespace kvs::cli
