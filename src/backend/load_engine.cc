#include "backend/load_engine.h"

#include <algorithm>
#include <cctype>
#include <thread>

#include <xxhash.h>

#include "backend/tensor_parallel.h"
#include "base/sha256.h"
#include "grammar/template_tool_format.h"
#include "plan/model_shape.h"
#include "template/chat_template.h"

namespace kvs::backend {
namespace {

// Template, tool-call syntax, reasoning format and the grammar vocabulary.
Status LoadChat(const EngineSpec& spec, LoadedEngine* out) {
  const tok::Tokenizer& tok = *out->tokenizer;
  tmpl::ChatTemplateLoadOptions template_options;
  template_options.override = spec.chat_template;
  KVS_ASSIGN_OR_RETURN(tmpl::ModelChatTemplate chat, tmpl::LoadModelChatTemplate(tok, template_options));
  out->chat_template = std::make_unique<tmpl::ChatTemplate>(std::move(chat.tmpl));
  out->chat_template_is_fallback = chat.is_fallback;
  out->chat_template_origin = std::move(chat.origin);
  out->chat_probe = std::move(chat.probe);
  // Tool calls: the template's syntax, else Hermes's where the prompt teaches
  // it (grammar/template_tool_format.h); replies are parsed in it and calls in
  // the history are written in it.
  out->tool_format = grammar::UseToolCallFormatFor(out->chat_template.get());
  // Reasoning: the template's tags unless reasoning_parser names a format.
  if (spec.reasoning_parser == "auto") {
    out->reasoning_format = grammar::DetectReasoningFormat(out->chat_template->source());
  } else {
    KVS_ASSIGN_OR_RETURN(out->reasoning_format, grammar::ReasoningFormatByName(spec.reasoning_parser));
  }
  // Constrained decoding: the tokens as bytes, masks as wide as the logits;
  // the formats' markers (special tokens in some vocabularies) may be forced
  // (a tool call's, and the end of a reasoning section before the constraint).
  grammar::VocabularyOptions vo;
  for (const std::vector<std::string>& markers :
       {grammar::ToolCallMarkers(out->tool_format), grammar::ReasoningMarkers(out->reasoning_format)}) {
    for (const std::string& m : markers) {
      const bool listed = std::find(vo.special_tokens_as_text.begin(), vo.special_tokens_as_text.end(), m) !=
                          vo.special_tokens_as_text.end();
      if (!listed && tok.FindToken(m) >= 0) vo.special_tokens_as_text.push_back(m);
    }
  }
  vo.mask_vocab_size = out->model.vocab;  // the runner's logits width
  if (auto v = grammar::Vocabulary::FromTokenizer(tok, vo); v.ok()) {
    out->grammar_vocab = std::move(*v);
  } else {
    out->grammar_vocab_status = v.status();
  }
  return Status::Ok();
}

// DataLoss naming both hashes when `path` does not hash to `expected`
// (64 hex digits, any case); "" checks nothing.
Status CheckSha256(const std::string& path, const std::string& expected) {
  if (expected.empty()) return Status::Ok();
  KVS_ASSIGN_OR_RETURN(const std::string got, Sha256File(path));
  std::string want = expected;
  std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return std::tolower(c); });
  if (got != want) return Status(StatusCode::kDataLoss, path + " hashes to " + got + ", the expected SHA-256 is " + want);
  return Status::Ok();
}

// The draft model of spec (speculative.method draft): loaded, its vocabulary
// checked against the model's tokenizer token by token.
StatusOr<std::unique_ptr<model::LlamaModel>> LoadDraftModel(const EngineSpec& spec, const LoadedEngine& loaded) {
  if (spec.draft_model_path.empty()) {
    return InvalidArgument("speculative.method draft needs speculative.draft_model: a GGUF file of a smaller model "
                           "with the same vocabulary");
  }
  if (spec.group != nullptr && spec.group->size() > 1) {
    return InvalidArgument("speculative.method draft does not run with tensor / pipeline parallel yet");
  }
  const std::string where = "speculative.draft_model " + spec.draft_model_path;
  KVS_RETURN_IF_ERROR(CheckSha256(spec.draft_model_path, spec.draft_sha256).WithContext(where));
  auto draft = model::LlamaModel::Load(spec.draft_model_path, model::LoadOptions::ForDtype(spec.model_dtype));
  if (!draft.ok()) return draft.status().WithContext(where);
  const model::ModelConfig& d = (*draft)->config();
  if (d.vocab != loaded.model.vocab) {
    return InvalidArgument("{}: its vocabulary has {} tokens, the model's {}; a draft model must share the model's "
                           "vocabulary", where, d.vocab, loaded.model.vocab);
  }
  if (loaded.tokenizer != nullptr) {
    auto tok = tok::Tokenizer::FromGguf((*draft)->file());
    if (!tok.ok()) return tok.status().WithContext(where + ": tokenizer");
    const tok::Tokenizer& mine = *loaded.tokenizer;
    if ((*tok)->vocab_size() != mine.vocab_size()) {
      return InvalidArgument("{}: its tokenizer has {} tokens, the model's {}", where, (*tok)->vocab_size(),
                             mine.vocab_size());
    }
    for (int32_t id = 0; id < mine.vocab_size(); ++id) {
      if ((*tok)->TokenText(id) != mine.TokenText(id)) {
        return InvalidArgument("{}: token {} is \"{}\" there and \"{}\" in the model; a draft model must share the "
                               "model's vocabulary", where, id, (*tok)->TokenText(id), mine.TokenText(id));
      }
    }
  }
  return std::move(*draft);
}

}  // namespace

StatusOr<LoadedEngine> LoadEngine(const EngineSpec& spec) {
  // The device first: an unknown one fails before a large file is read.
  KVS_RETURN_IF_ERROR(FindRunnerFactory(spec.device).status().WithContext("device"));
  if (spec.load_chat && !spec.load_tokenizer) return InvalidArgument("LoadEngine: load_chat needs load_tokenizer");
  KVS_RETURN_IF_ERROR(CheckSha256(spec.model_path, spec.sha256));
  const bool parallel = spec.group != nullptr && spec.group->size() > 1;
  if (parallel && spec.device != "cpu") {
    return InvalidArgument("tensor / pipeline parallel runs on device cpu, not '{}'", spec.device);
  }
  if (parallel && spec.tensor_parallel * spec.pipeline_parallel != spec.group->size()) {
    return InvalidArgument("tensor_parallel {} x pipeline_parallel {} is not the {} processes started",
                           spec.tensor_parallel, spec.pipeline_parallel, spec.group->size());
  }
  LoadedEngine out;
  out.threads = spec.threads > 0 ? spec.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (parallel) {
    KVS_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(spec.model_path));
    KVS_ASSIGN_OR_RETURN(const model::ModelConfig whole, model::ModelConfig::FromGguf(*file));
    KVS_RETURN_IF_ERROR(whole.CheckPipeline(spec.pipeline_parallel));
    const model::LoadOptions lo =
        ShardLoadOptions(spec.model_dtype, spec.tensor_parallel, spec.pipeline_parallel, 0, whole.n_layers);
    auto m = model::LlamaModel::FromFile(std::move(file), lo);
    if (!m.ok()) return m.status().WithContext(spec.model_path);
    out.weights = std::move(*m);
  } else {
    KVS_ASSIGN_OR_RETURN(out.weights,
                         model::LlamaModel::Load(spec.model_path, model::LoadOptions::ForDtype(spec.model_dtype)));
  }
  out.model = out.weights->config();
  out.weight_bytes = out.weights->weight_bytes();
  out.bf16_weight_bytes = out.weights->bf16_weight_bytes();
  if (spec.load_tokenizer) {
    auto tok = tok::Tokenizer::FromGguf(out.weights->file());
    if (!tok.ok()) return tok.status().WithContext("tokenizer");
    out.tokenizer = std::move(*tok);
  }
  if (spec.load_chat) KVS_RETURN_IF_ERROR(LoadChat(spec, &out));
  if (spec.assemble_engine) KVS_RETURN_IF_ERROR(AssembleEngine(spec, &out));
  return out;
}

Status AssembleEngine(const EngineSpec& spec, LoadedEngine* loaded) {
  if (loaded->weights == nullptr) return FailedPrecondition("AssembleEngine: the weights were already taken");
  KVS_ASSIGN_OR_RETURN(const RunnerFactoryEntry* factory, FindRunnerFactory(spec.device));
  std::unique_ptr<model::LlamaModel> model = std::move(loaded->weights);
  KVS_ASSIGN_OR_RETURN(plan::ModelShape shape, plan::ShapeFromGgufFile(model->file(), spec.model_path));
  const bool parallel = spec.group != nullptr && spec.group->size() > 1;
  if (parallel) {
    // One rank's pool: its layers' share of the KV heads (the weights are its shard's).
    shape.kv_heads = model->config().n_kv_heads;  // a share, or one replicated head
    shape.layers = model->config().n_layers;
  }
  plan::ServingPlanOptions po;
  po.memory_limit_bytes = spec.memory_limit_bytes;
  po.memory_fraction = spec.memory_fraction;
  po.kv_dtype = spec.kv_dtype;
  po.block_size = spec.block_size;
  po.context = spec.context;
  if (spec.context_within_trained && loaded->model.context_length > 0) {
    po.context = std::min<int64_t>(po.context, loaded->model.context_length);
  }
  po.sequences = spec.sequences;
  po.max_num_batched_tokens = spec.engine.max_num_batched_tokens;
  po.max_batch_size = spec.engine.max_batch_size;
  po.threads = loaded->threads;
  std::unique_ptr<model::LlamaModel> draft;
  plan::ModelShape draft_shape;
  if (spec.engine.speculative.method == engine::SpeculativeConfig::Method::kDraft) {
    KVS_ASSIGN_OR_RETURN(draft, LoadDraftModel(spec, *loaded));
    KVS_ASSIGN_OR_RETURN(draft_shape, plan::ShapeFromGgufFile(draft->file(), spec.draft_model_path));
    po.draft = &draft_shape;
    po.draft_weights_bytes = draft->weight_bytes();
    loaded->draft_model = draft->config();
  }
  KVS_ASSIGN_OR_RETURN(loaded->plan, plan::PlanServing(shape, model->weight_bytes(), po));
  // LongRoPE picks its factors by the context served (as llama.cpp does).
  model->SetContextLength(loaded->plan.context);
  if (draft) draft->SetContextLength(loaded->plan.context);

  RunnerOptions ro;
  ro.threads = loaded->threads;
  ro.block_size = spec.block_size;
  ro.num_blocks = static_cast<int32_t>(loaded->plan.num_kv_blocks);
  ro.num_window_blocks = static_cast<int32_t>(loaded->plan.num_window_blocks);  // sliding layers' own group
  ro.kv_dtype = spec.kv_dtype;
  ro.max_batch_tokens = std::max(spec.engine.max_num_batched_tokens, spec.engine.max_batch_size);
  std::unique_ptr<engine::ModelRunner> runner;
  if (parallel) {
    TensorParallelSetup setup;
    setup.tensor_parallel = spec.tensor_parallel;
    setup.pipeline_parallel = spec.pipeline_parallel;
    KVS_ASSIGN_OR_RETURN(setup.model_sha256, Sha256File(spec.model_path));
    setup.model_dtype = spec.model_dtype;
    setup.context = loaded->plan.context;
    setup.runner = ro;
    loaded->parallel_stats = std::make_shared<ParallelStatsBoard>(spec.group->size());
    KVS_ASSIGN_OR_RETURN(runner, MakeTensorParallelRunner(std::move(model), setup, *spec.group, loaded->parallel_stats));
  } else {
    KVS_ASSIGN_OR_RETURN(runner, factory->make(std::move(model), ro));
  }
  std::unique_ptr<engine::ModelRunner> draft_runner;
  if (draft) {
    // The same block ids (engine/draft_model.h), its own storage; no window group.
    RunnerOptions dro = ro;
    dro.num_window_blocks = 0;
    KVS_ASSIGN_OR_RETURN(draft_runner, factory->make(std::move(draft), dro));
  }
  engine::EngineConfig ec = spec.engine;
  ec.max_context_length = static_cast<int32_t>(loaded->plan.context);
  if (parallel && !ec.kv_disk.path.empty()) {
    // The disk tier's blocks are every rank's part in rank order: they mean
    // something only for this layout.
    const uint64_t layout[3] = {ec.kv_disk.fingerprint, static_cast<uint64_t>(spec.tensor_parallel),
                                static_cast<uint64_t>(spec.pipeline_parallel)};
    ec.kv_disk.fingerprint = XXH3_64bits(layout, sizeof layout);
  }
  if (spec.eos_from_tokenizer && loaded->tokenizer) ec.eos_token_ids = loaded->tokenizer->end_of_generation_ids();
  KVS_ASSIGN_OR_RETURN(loaded->engine, engine::Engine::Create(std::move(ec), std::move(runner), std::move(draft_runner)));
  return Status::Ok();
}

Status MakeRunner(const EngineSpec& spec, const RunnerOptions& options, LoadedEngine* loaded) {
  if (loaded->weights == nullptr) return FailedPrecondition("MakeRunner: the weights were already taken");
  KVS_ASSIGN_OR_RETURN(const RunnerFactoryEntry* factory, FindRunnerFactory(spec.device));
  KVS_ASSIGN_OR_RETURN(loaded->runner, factory->make(std::move(loaded->weights), options));
  return Status::Ok();
}

}  // namespace kvs::backend
