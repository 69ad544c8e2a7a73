#include "server/engine_backend.h"

#include <xxhash.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "backend/tensor_parallel.h"
#include "kernels/kernels.h"
#include "plan/device.h"
#include "plan/plan.h"
#include "template/chat_render.h"
#include "template/chat_template.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::server {

struct EngineBackend::Live {
  std::mutex mu;  // serializes drains (any executor is safe; a strand never contends)
  std::shared_ptr<engine::RequestStream> stream;
  Executor executor;
  ChunkCallback cb;                                 // guarded by mu
  std::unique_ptr<tok::IncrementalDecoder> decoder;  // guarded by mu
  bool logprobs = false;
  bool done = false;  // guarded by mu: the final chunk was delivered
};

EngineBackend::EngineBackend() = default;

EngineBackend::~EngineBackend() { Shutdown(); }

StatusOr<backend::EngineSpec> EngineSpecFromConfig(const ServeConfig& config) {
  backend::EngineSpec spec;
  spec.model_path = config.model.path;
  spec.model_dtype = config.model.dtype;
  if (auto device = backend::FindRunnerFactory(config.runtime.device); !device.ok()) {
    return device.status().WithContext("runtime.device");
  }
  spec.device = config.runtime.device;
  spec.load_chat = true;
  spec.chat_template = config.model.chat_template;
  spec.reasoning_parser = config.model.reasoning_parser;
  spec.threads = static_cast<int>(config.runtime.threads);
  KVS_ASSIGN_OR_RETURN(spec.kv_dtype, plan::ParseKvDType(config.kv_cache.dtype));
  spec.block_size = static_cast<int32_t>(config.kv_cache.block_size);
  spec.context = config.model.max_context_length;
  spec.context_within_trained = true;
  spec.sequences = config.runtime.max_concurrent_requests;
  spec.memory_limit_bytes = static_cast<uint64_t>(config.kv_cache.memory_limit_bytes);
  spec.memory_fraction = config.kv_cache.memory_fraction;
  engine::EngineConfig& ec = spec.engine;
  ec.max_num_batched_tokens = static_cast<int32_t>(config.runtime.max_num_batched_tokens);
  ec.max_prefill_tokens_while_decoding = static_cast<int32_t>(config.runtime.max_prefill_tokens_while_decoding);
  ec.max_batch_size = static_cast<int32_t>(config.runtime.max_batch_size);
  // The service admits at most max_concurrent_requests sequences, so the
  // engine's own queue bound is never what refuses a request.
  ec.max_queued_requests = static_cast<int32_t>(config.runtime.max_concurrent_requests);
  ec.enable_prefix_caching = config.kv_cache.prefix_caching;
  if (!config.kv_cache.disk_path.empty()) {
    ec.kv_disk.path = config.kv_cache.disk_path;
    ec.kv_disk.max_bytes = config.kv_cache.disk_max_bytes;
    // What the stored KV bytes depend on besides the layout the engine adds:
    // the weights (their SHA-256 when serve computed it, else the path) and
    // how they are computed with and stored as.
    const std::string id = fmt::format("{}|{}|{}", config.model.sha256.empty() ? config.model.path : config.model.sha256,
                                       config.model.dtype, config.kv_cache.dtype);
    ec.kv_disk.fingerprint = XXH3_64bits(id.data(), id.size());
  }
  ec.output_reservation = config.runtime.output_reservation;
  KVS_ASSIGN_OR_RETURN(ec.speculative.method, engine::ParseSpeculativeMethod(config.speculative.method));
  ec.speculative.num_tokens = static_cast<int32_t>(config.speculative.num_tokens);
  ec.speculative.ngram_min = static_cast<int32_t>(config.speculative.ngram_min);
  ec.speculative.ngram_max = static_cast<int32_t>(config.speculative.ngram_max);
  spec.draft_model_path = config.speculative.draft_model;
  spec.draft_sha256 = config.speculative.draft_model_sha256;
  ec.policy = config.runtime.scheduling_policy == "priority" ? engine::SchedulingPolicy::kPriority
                                                              : engine::SchedulingPolicy::kFcfs;
  return spec;  // eos_token_ids: the tokenizer's (LoadEngine)
}

StatusOr<std::unique_ptr<EngineBackend>> EngineBackend::Load(const ServeConfig& config, Collective* group) {
  std::unique_ptr<EngineBackend> b(new EngineBackend());
  KVS_ASSIGN_OR_RETURN(backend::EngineSpec spec, EngineSpecFromConfig(config));
  if (group != nullptr && group->size() > 1) {
    spec.group = group;
    spec.tensor_parallel = static_cast<int>(config.runtime.tensor_parallel);
    spec.pipeline_parallel = static_cast<int>(config.runtime.pipeline_parallel);
  }
  KVS_ASSIGN_OR_RETURN(backend::LoadedEngine loaded, backend::LoadEngine(spec));
  if (loaded.bf16_weight_bytes > 0) {
    spdlog::info("model.dtype {}: {} bytes of {} matrices converted to BF16{}", config.model.dtype,
                 loaded.bf16_weight_bytes, config.model.dtype == "auto" ? "F16" : "F32/F16",
                 kernels::NativeBf16Dot() ? " (AVX512_BF16 dot products; model.dtype f16 keeps F16 exact)"
                                          : "; this CPU has no AVX512_BF16, so they are widened to f32");
  } else if (config.model.dtype == "f32" || config.model.dtype == "f16") {
    spdlog::info("model.dtype {}: weights as stored, float matrices multiplied in f32", config.model.dtype);
  }
  b->tok_ = std::move(loaded.tokenizer);
  b->template_ = std::move(loaded.chat_template);
  b->info_.has_chat_template = !loaded.chat_template_is_fallback;
  if (loaded.chat_template_is_fallback) {
    spdlog::warn("{} has no chat template; /v1/chat/completions uses ChatML", config.model.path);
  }
  if (!config.model.chat_template.empty()) {
    spdlog::info("chat template: {} (model.chat_template)", loaded.chat_template_origin);
  }
  for (const std::string& w : loaded.chat_probe.warnings) spdlog::warn("{}", w);
  for (const std::string& n : loaded.chat_probe.notes) spdlog::info("{}", n);
  b->tool_format_ = loaded.tool_format;
  const tmpl::ChatCapabilities& caps = b->template_->capabilities();
  spdlog::info("tool calls: {} syntax", grammar::ToolCallFormatName(b->tool_format_));
  {
    std::string polyfills;
    for (const std::string& p : caps.Polyfills()) polyfills += (polyfills.empty() ? "" : ", ") + p;
    if (!polyfills.empty()) {
      spdlog::info("chat template polyfills: {} (the template lacks these capabilities; tool calls written in {} syntax)",
                   polyfills, grammar::ToolCallFormatName(b->tool_format_));
    } else if (caps.probed) {
      spdlog::info("chat template polyfills: none (the template renders every shape of a tool loop)");
    }
  }

  b->engine_ = std::move(loaded.engine);
  b->parallel_stats_ = std::move(loaded.parallel_stats);
  KVS_RETURN_IF_ERROR(b->engine_->Start());
  const plan::ServingPlan& plan = loaded.plan;
  b->memory_.weights_bytes = plan.weights_bytes;
  b->memory_.kv_pool_bytes = plan.kv_pool_bytes;
  b->memory_.activation_bytes = plan.activation_bytes;
  b->memory_.overhead_bytes = plan.overhead_bytes;

  b->info_.name = config.model.name;  // "": the service derives it from the path
  b->info_.path = config.model.path;
  b->info_.architecture = loaded.model.arch;
  b->info_.trained_context_length = loaded.model.context_length;
  b->info_.limits = b->engine_->limits();
  for (const auto& [id, text] : grammar::ToolCallMarkerTokens(*b->tok_, b->tool_format_)) b->marker_text_.emplace(id, text);
  b->reasoning_format_ = loaded.reasoning_format;
  spdlog::info("reasoning: {}", b->reasoning_format_.enabled() ? b->reasoning_format_.name : std::string("none"));
  for (const auto& [id, text] : grammar::DroppedMarkerTokens(*b->tok_, grammar::ReasoningMarkers(b->reasoning_format_))) {
    b->reasoning_marker_text_.emplace(id, text);
  }
  b->grammar_vocab_ = std::move(loaded.grammar_vocab);
  if (b->grammar_vocab_ == nullptr) {
    spdlog::warn("constrained decoding is unavailable: {}", loaded.grammar_vocab_status.ToString());
  }
  spdlog::info("engine: {} KV blocks of {} tokens ({}), {} threads, context {} (device {})", plan.num_kv_blocks,
               spec.block_size, plan::FormatBinary(plan.kv_pool_bytes), loaded.threads, plan.context, spec.device);
  spdlog::info("{}", plan.Describe(spec.kv_dtype));
  return b;
}

StatusOr<std::vector<int32_t>> EngineBackend::Tokenize(std::string_view text, bool add_special) {
  // Special-token text is recognised: chat templates write it, and so does
  // a completions client that formats its own prompt.
  return tok_->Encode(text, add_special, /*parse_special=*/true);
}

StatusOr<std::string> EngineBackend::Detokenize(std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (id < 0 || id >= tok_->vocab_size()) {
      return InvalidArgument("token id {} is outside the vocabulary [0, {})", id, tok_->vocab_size());
    }
  }
  return tok_->Decode(ids, /*skip_special=*/true);
}

std::string EngineBackend::TokenString(int32_t id) {
  if (id < 0 || id >= tok_->vocab_size()) return {};
  return tok_->TokenText(id);
}

StatusOr<ChatPrompt> EngineBackend::RenderChatPrompt(const nlohmann::ordered_json& messages,
                                                     const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                     const nlohmann::ordered_json& template_kwargs) {
  return api::RenderChatPrompt(*template_, *tok_, messages, tools, add_generation_prompt, template_kwargs);
}

Status EngineBackend::Submit(engine::ValidatedRequest request, Executor executor, ChunkCallback on_chunk) {
  auto live = std::make_shared<Live>();
  live->executor = std::move(executor);
  live->cb = std::move(on_chunk);
  live->logprobs = request.request().sampling.logprobs.has_value();
  live->decoder = std::make_unique<tok::IncrementalDecoder>(*tok_, /*skip_special=*/true, /*at_sequence_start=*/false);
  const std::string id = request.request().request_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(StatusCode::kUnavailable, "the engine is shutting down");
    auto stream = engine_->Submit(std::move(request));
    if (!stream.ok()) return stream.status();
    live->stream = std::move(*stream);
    live_[id] = live;
  }
  // The engine may already have pushed output: SetOnReady then signals here.
  std::weak_ptr<Live> weak = live;
  live->stream->SetOnReady([this, weak] {
    if (std::shared_ptr<Live> l = weak.lock()) l->executor([this, l] { Drain(l); });
  });
  return Status::Ok();
}

void EngineBackend::Cancel(const std::string& request_id) {
  Status s = engine_->Cancel(request_id);  // NotFound: it already finished
  (void)s;
}

void EngineBackend::Drain(const std::shared_ptr<Live>& live) {
  std::unique_lock<std::mutex> lock(live->mu);
  if (live->done) return;
  auto c = live->stream->Next(std::chrono::milliseconds(0));
  if (!c.ok()) return;  // an earlier drain took it
  GenerationChunk out;
  out.tokens.reserve(c->token_ids.size());
  for (size_t i = 0; i < c->token_ids.size(); ++i) {
    const int32_t id = c->token_ids[i];
    api::TokenOutput t;
    t.token_id = id;
    t.text = live->decoder->Add(id);
    t.piece = tok_->TokenPiece(id);
    if (auto m = marker_text_.find(id); m != marker_text_.end()) t.marker_text = m->second;
    if (auto m = reasoning_marker_text_.find(id); m != reasoning_marker_text_.end()) t.reasoning_marker = m->second;
    if (live->logprobs && i < c->logprobs.size()) {
      t.logprob = c->logprobs[i].logprob;
      for (const auto& alt : c->logprobs[i].top) {
        t.top_logprobs.push_back({alt.token_id, tok_->TokenPiece(alt.token_id), alt.logprob});
      }
    }
    out.tokens.push_back(std::move(t));
  }
  out.num_cached_tokens = c->num_cached_tokens;
  out.num_output_tokens = c->num_output_tokens;
  if (c->timings.queue_time_s > 0) out.queue_seconds = c->timings.queue_time_s;
  if (!c->finished()) {
    live->cb(std::move(out));
    return;
  }
  out.finish = c->finish_reason;
  out.error = c->error;
  out.text_tail = live->decoder->Flush();
  live->done = true;
  ChunkCallback cb = std::move(live->cb);
  live->cb = nullptr;
  cb(std::move(out));
  lock.unlock();
  std::lock_guard<std::mutex> map_lock(mu_);
  const auto it = live_.find(live->stream->request_id());
  if (it != live_.end() && it->second == live) live_.erase(it);
}

std::optional<kvcache::CacheEventsPage> EngineBackend::CacheEvents(uint64_t epoch, uint64_t since, size_t max_events) {
  if (!engine_->config().enable_prefix_caching) return std::nullopt;
  return engine_->cache_events().Since(epoch, since, max_events);
}

BackendStats EngineBackend::Stats() {
  BackendStats s;
  s.engine = engine_->GetStats();
  s.memory = memory_;
  // Every KV group counts (a sliding-window model's window group too): the
  // engine computes it with the rule its admission follows.
  s.max_admissible_context = std::min<int64_t>(info_.limits.max_context_length, s.engine.max_admissible_tokens);
  if (parallel_stats_ != nullptr) s.parallel_ranks = parallel_stats_->Snapshot();
  return s;
}

void EngineBackend::Shutdown() {
  std::lock_guard<std::mutex> once(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  // Every live request gets its final chunk (kError: the engine stopped),
  // posted to its executor by the stream's ready signal. Entries of live_
  // whose drain never runs (the executor stopped) go with the backend.
  if (engine_) engine_->Stop();
}

}  // namespace kvs::server
