// `kvserve run`: generate text for one prompt through the serving engine
// (the same API the HTTP server uses). stdout gets the prompt followed by the
// generated text; diagnostics and speed figures go to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "backend/load_engine.h"
#include "cli/command.h"
#include "cli/default_model.h"
#include "engine/engine.h"
#include "template/chat_template.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string prompt = "Once upon a time";
  int n_predict = 128;
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int64_t seed = -1;
  int threads = 0;
  int ctx = 0;
  std::string kv_dtype = "f16";
  std::string dtype = "auto";
  bool ignore_eos = false;
  bool chat = false;
  std::string system;
};

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

// The chat prompt: --system and -p as one conversation, rendered with the
// model's chat template (ChatML when the model has none), which LoadEngine
// loaded and probed.
StatusOr<std::string> RenderChat(const RunOptions& o, const backend::LoadedEngine& loaded) {
  const tok::Tokenizer& tok = *loaded.tokenizer;
  for (const std::string& w : loaded.chat_probe.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (loaded.chat_template_is_fallback && loaded.chat_probe.warnings.empty()) {
    std::fprintf(stderr, "the model has no chat template; using ChatML\n");
  }
  tmpl::ChatRequest r;
  if (!o.system.empty()) r.messages.push_back({{"role", "system"}, {"content", o.system}});
  r.messages.push_back({{"role", "user"}, {"content", o.prompt}});
  r.add_generation_prompt = true;
  tmpl::SetSpecialTokens(tok, &r);
  auto text = loaded.chat_template->Render(r);
  if (!text.ok()) return text.status().WithContext("rendering the chat template");
  return text;
}

int RunGenerate(RunOptions o) {
  using Clock = std::chrono::steady_clock;
  const auto t_load = Clock::now();
  if (!o.system.empty() && !o.chat) return Fail(InvalidArgument("--system needs --chat"));
  if (o.model.empty()) o.model = DefaultModelPath();
  if (o.model.empty()) {
    std::fprintf(stderr, "error: %s\n", kNoModelMessage);
    return 1;
  }
  auto kv = DTypeFromName(o.kv_dtype);
  if (!kv) return Fail(InvalidArgument("unknown --kv-dtype '{}' (f32, f16, bf16, q8_0, q4_0, q4_1)", o.kv_dtype));
  // The weights, tokenizer and (--chat) template first; the engine is
  // sized once the prompt's length is known.
  backend::EngineSpec spec;
  spec.model_path = o.model;
  spec.model_dtype = o.dtype;
  spec.load_chat = o.chat;
  spec.assemble_engine = false;
  spec.threads = o.threads;
  spec.kv_dtype = *kv;
  spec.engine.max_num_batched_tokens = 512;
  spec.engine.max_batch_size = 1;
  auto loaded = backend::LoadEngine(spec);
  if (!loaded.ok()) return Fail(loaded.status());
  const tok::Tokenizer& tok = *loaded->tokenizer;
  const model::ModelConfig cfg = loaded->model;

  std::vector<int32_t> prompt;
  if (o.chat) {
    auto text = RenderChat(o, *loaded);
    if (!text.ok()) return Fail(text.status());
    // The template writes BOS itself where the model wants one, and its
    // special tokens (<|im_start|>...) must become their ids.
    prompt = tok.Encode(*text, /*add_special=*/false, /*parse_special=*/true);
  } else {
    prompt = tok.Encode(o.prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt.empty()) return Fail(InvalidArgument("the prompt encodes to no tokens"));
  spec.context = o.ctx > 0 ? o.ctx : std::max<int>(cfg.context_length, static_cast<int>(prompt.size()) + o.n_predict);
  if (Status s = backend::AssembleEngine(spec, &*loaded); !s.ok()) return Fail(s);
  engine::Engine& engine = *loaded->engine;
  std::fprintf(stderr, "kvserve run: %s\nmodel: %s\nload: %.1f ms, threads %d, kv %s, prompt %zu tokens\n",
               o.model.c_str(), cfg.Describe().c_str(),
               std::chrono::duration<double, std::milli>(Clock::now() - t_load).count(), loaded->threads,
               o.kv_dtype.c_str(), prompt.size());
  KVS_CHECK(engine.Start().ok());

  engine::Request req;
  req.prompt_token_ids = prompt;
  req.sampling.temperature = o.temp;
  req.sampling.top_k = o.top_k;
  req.sampling.top_p = o.top_p;
  req.sampling.min_p = o.min_p;
  req.sampling.repetition_penalty = o.repeat_penalty;
  req.sampling.max_tokens = o.n_predict;
  req.sampling.ignore_eos = o.ignore_eos;
  if (o.seed >= 0) req.sampling.seed = static_cast<uint64_t>(o.seed);
  auto stream = engine.Submit(std::move(req));
  if (!stream.ok()) return Fail(stream.status());

  if (!o.chat) std::fputs(o.prompt.c_str(), stdout);  // chat mode prints only the reply
  std::fflush(stdout);
  tok::IncrementalDecoder dec(tok, /*skip_special=*/true, /*at_sequence_start=*/false);
  engine::StreamChunk last;
  int generated = 0;
  for (;;) {
    auto chunk = (*stream)->Next();
    if (!chunk.ok()) return Fail(chunk.status());
    for (int32_t id : chunk->token_ids) {
      std::fputs(dec.Add(id).c_str(), stdout);
      ++generated;
    }
    std::fflush(stdout);
    if (chunk->finished()) {
      last = std::move(*chunk);
      break;
    }
  }
  std::fputs(dec.Flush().c_str(), stdout);
  std::fputs("\n", stdout);
  engine.Stop();
  if (last.finish_reason == engine::FinishReason::kError) return Fail(last.error);
  const double ttft = last.timings.ttft_s, e2e = last.timings.e2e_s;
  std::fprintf(stderr, "prompt: %d tokens in %.1f ms (%.1f t/s); generated %d tokens in %.1f ms (%.1f t/s); finish: %s\n",
               last.num_prompt_tokens, ttft * 1e3, ttft > 0 ? last.num_prompt_tokens / ttft : 0.0, generated,
               (e2e - ttft) * 1e3, e2e > ttft && generated > 1 ? (generated - 1) / (e2e - ttft) : 0.0,
               engine::FinishReasonName(last.finish_reason));
  return 0;
}

const Registrar kRegister_run({"run", "Generate text for a prompt", [](CLI::App* app) {
                 auto o = std::make_shared<RunOptions>();
                 app->add_option("-m,--model", o->model, "GGUF model file (default: the bundled model)");
                 app->add_option("-p,--prompt", o->prompt, "Prompt text");
                 app->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->check(CLI::PositiveNumber);
                 app->add_option("--temp", o->temp, "Temperature (0: greedy)")->check(CLI::Range(0.0, 100.0));
                 app->add_option("--top-k", o->top_k, "Top-k (0: off)")->check(CLI::NonNegativeNumber);
                 app->add_option("--top-p", o->top_p, "Top-p (1: off)")->check(CLI::Range(0.0, 1.0));
                 app->add_option("--min-p", o->min_p, "Min-p (0: off)")->check(CLI::Range(0.0, 1.0));
                 app->add_option("--repeat-penalty", o->repeat_penalty, "Repetition penalty (1: off)");
                 app->add_option("-s,--seed", o->seed, "Random seed (-1: random)");
                 app->add_option("-t,--threads", o->threads, "Threads (0: all cores)")->check(CLI::NonNegativeNumber);
                 app->add_option("-c,--ctx-size", o->ctx, "Context length (0: the model's)")->check(CLI::NonNegativeNumber);
                 app->add_option("--kv-dtype", o->kv_dtype, "KV cache dtype: f32, f16, bf16, q8_0, q4_0, q4_1");
                 AddDtypeOption(app, &o->dtype);
                 app->add_flag("--ignore-eos", o->ignore_eos, "Keep generating after end-of-sequence");
                 app->add_flag("--chat", o->chat,
                               "Treat -p as a user message: apply the model's chat template and print only the reply");
                 app->add_option("--system", o->system, "System message for --chat");
                 return [o] { return RunGenerate(*o); };
               }});

}  // namespace
}  // namespace kvs::cli
