// LoadEngine: the one way a model becomes something that generates. Every
// caller that loads a model goes through it: the server's EngineBackend
// (server::EngineSpecFromConfig reads runtime.*, kv_cache.*, model.* into an
// EngineSpec once), `kvserve run`, `bench --offline`, `perplexity`.
//
// An EngineSpec says what to load and how (file, compute dtype, device,
// threads, KV cache, context, batching, chat template override, reasoning
// parser). LoadEngine checks the device (runner_factory.h) before reading
// anything, loads the weights and the tokenizer, optionally the chat side
// (template with its start-up probe, tool-call format, reasoning format,
// grammar vocabulary for constrained decoding), then assembles the engine:
// the memory plan (plan::PlanServing over the model's shape) sizes the KV
// pool, the device's factory makes the runner (sliding-window layers in a
// KV group of their own), and an engine::Engine drives it (not started).
//
// Callers that need the tokenizer before they can size the engine (`run`
// sizes the context by the prompt) or that drive a runner directly
// (`perplexity`, `bench --offline`) set assemble_engine = false and finish
// with AssembleEngine or MakeRunner. LoadEngine logs nothing: what it found
// (chat template origin, probe warnings, BF16 conversion) is in
// LoadedEngine for the caller to report in its own way.
// Thread-safety: the functions are reentrant; a LoadedEngine is a plain
// owner of what it holds (the engine is thread-safe as engine.h says).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/runner_factory.h"
#include "base/collective.h"
#include "base/dtype.h"
#include "base/status.h"
#include "engine/engine.h"
#include "grammar/reasoning.h"
#include "grammar/tool_calls.h"
#include "grammar/vocabulary.h"
#include "model/llama.h"
#include "plan/serving.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::backend {

class ParallelStatsBoard;  // tensor_parallel.h

struct EngineSpec {
  // What to load.
  std::string model_path;             // GGUF file
  // Expected SHA-256 of the file (64 hex digits, any case); "": not
  // checked. The server leaves it "": its loader hashes the file anyway for
  // the model card and checks model.sha256 there (serve.cc).
  std::string sha256;
  std::string model_dtype = "auto";   // compute dtype: auto, f32, f16, bf16 (model::LoadOptions::ForDtype)
  std::string device = "cpu";         // a RunnerFactories() name
  bool load_tokenizer = true;         // false: weights only (a model without a vocabulary loads too)
  // The chat side (needs the tokenizer): template, tool-call and reasoning
  // formats, grammar vocabulary.
  bool load_chat = false;
  std::string chat_template;          // "": the model's; else a built-in name or a .jinja file
  std::string reasoning_parser = "auto";  // auto (from the template), none, or a format name

  // How to run it.
  bool assemble_engine = true;        // false: stop after loading (see AssembleEngine, MakeRunner)
  int threads = 0;                    // compute threads; 0: one per core
  DType kv_dtype = DType::kF16;
  int32_t block_size = 16;
  int64_t context = 0;                // tokens per sequence; 0: the model's trained context
  bool context_within_trained = false;  // cap `context` at the model's trained context
  int64_t sequences = 1;              // sequences that should fit at full context at once
  uint64_t memory_limit_bytes = 0;    // 0: this machine's memory
  double memory_fraction = 1.0;
  // Batch limits, policy, prefix caching, queue bound. AssembleEngine sets
  // max_context_length to the plan's context and, with eos_from_tokenizer
  // and a tokenizer, eos_token_ids to its end-of-generation ids.
  engine::EngineConfig engine;
  bool eos_from_tokenizer = true;
  // The draft model of engine.speculative.method draft (engine/draft_model.h):
  // a GGUF file of a smaller model with the same vocabulary, loaded with the
  // same dtype and KV settings; AssembleEngine loads it, checks its
  // vocabulary against the model's and counts it in the memory plan.
  std::string draft_model_path;
  std::string draft_sha256;  // its expected SHA-256 as `sha256` above; "": not checked
  // Tensor / pipeline parallel (backend/tensor_parallel.h): this process is
  // rank 0 of `group` (tensor_parallel x pipeline_parallel ranks, more than
  // one): it loads its shard of stage 0, plans the KV pool of one rank (its
  // layers' share of the KV heads) and drives the other ranks. Needs device
  // "cpu"; not owned.
  Collective* group = nullptr;
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
};

struct LoadedEngine {
  // The model: its description, and its weights until a runner takes them.
  model::ModelConfig model;
  uint64_t weight_bytes = 0;
  uint64_t bf16_weight_bytes = 0;  // matrices converted to BF16 at load (model_dtype)
  std::unique_ptr<model::LlamaModel> weights;  // nullptr once AssembleEngine or MakeRunner took them
  int threads = 0;                 // spec.threads resolved

  std::unique_ptr<tok::Tokenizer> tokenizer;  // with load_tokenizer

  // With load_chat:
  std::unique_ptr<tmpl::ChatTemplate> chat_template;  // capabilities set (the start-up probe)
  bool chat_template_is_fallback = false;  // ChatML: the model has none (or its own was replaced)
  std::string chat_template_origin;        // "the model's", "built-in chatml", "file PATH", ...
  tmpl::ProbeReport chat_probe;            // warnings and notes for the caller to show
  grammar::ToolCallFormat tool_format = grammar::ToolCallFormat::kNone;
  grammar::ReasoningFormat reasoning_format;
  // Token masks as wide as the logits; nullptr with grammar_vocab_status
  // saying why (constrained decoding is then unavailable).
  std::shared_ptr<const grammar::Vocabulary> grammar_vocab;
  Status grammar_vocab_status;

  // With assemble_engine (or after AssembleEngine): not started.
  std::unique_ptr<engine::Engine> engine;
  plan::ServingPlan plan;
  model::ModelConfig draft_model;  // with a draft model: its description
  // Tensor parallel (EngineSpec::group): every rank's work so far, for metrics.
  std::shared_ptr<ParallelStatsBoard> parallel_stats;
  // After MakeRunner: a runner driven directly, without an engine.
  std::unique_ptr<engine::ModelRunner> runner;
};

StatusOr<LoadedEngine> LoadEngine(const EngineSpec& spec);

// Plans the KV pool, makes the spec's runner from loaded->weights and the
// engine over it. spec is the one LoadEngine had (its context may have been
// set since).
Status AssembleEngine(const EngineSpec& spec, LoadedEngine* loaded);

// A runner of the spec's device over loaded->weights with exactly the
// geometry given (no memory plan), in loaded->runner: for tools that run
// forward passes themselves.
Status MakeRunner(const EngineSpec& spec, const RunnerOptions& options, LoadedEngine* loaded);

}  // namespace kvs::backend
