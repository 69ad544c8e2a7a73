#include "server/engine_backend.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "backend/cpu_runner.h"
#include "engine/engine.h"
#include "model/llama.h"
#include "plan/device.h"
#include "plan/model_shape.h"
#include "plan/plan.h"
#include "template/chat_template.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::server {

namespace {

// How long the pump naps when no stream had anything new.
constexpr auto kPumpNap = std::chrono::microseconds(300);

FinishReason FromEngine(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kStop: return FinishReason::kStop;
    case engine::FinishReason::kLength: return FinishReason::kLength;
    case engine::FinishReason::kCancelled: return FinishReason::kCancelled;
    default: return FinishReason::kError;
  }
}

}  // namespace

struct EngineBackend::Live {
  std::shared_ptr<engine::RequestStream> stream;
  ChunkCallback cb;
  std::unique_ptr<tok::IncrementalDecoder> decoder;
  bool logprobs = false;
  bool done = false;
};

EngineBackend::EngineBackend() = default;

EngineBackend::~EngineBackend() { Shutdown(); }

StatusOr<std::unique_ptr<EngineBackend>> EngineBackend::Load(const ServeConfig& config) {
  std::unique_ptr<EngineBackend> b(new EngineBackend());
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<model::LlamaModel> model, model::LlamaModel::Load(config.model.path));
  auto tok = tok::Tokenizer::FromGguf(model->file());
  if (!tok.ok()) return tok.status().WithContext("tokenizer");
  b->tok_ = std::move(*tok);
  if (config.model.dtype != "auto") {
    spdlog::warn("model.dtype {} is not used by the CPU backend yet (it computes in f32)", config.model.dtype);
  }

  KVS_ASSIGN_OR_RETURN(tmpl::ModelChatTemplate chat, tmpl::LoadModelChatTemplate(*b->tok_));
  b->template_ = std::make_unique<tmpl::ChatTemplate>(std::move(chat.tmpl));
  b->info_.has_chat_template = !chat.is_fallback;
  if (chat.is_fallback) spdlog::warn("{} has no chat template; /v1/chat/completions uses ChatML", config.model.path);

  const model::ModelConfig mc = model->config();
  int64_t context = config.model.max_context_length;
  if (mc.context_length > 0) context = std::min<int64_t>(context, mc.context_length);
  const int64_t block = config.kv_cache.block_size;
  const int64_t threads = config.runtime.threads > 0 ? config.runtime.threads
                                                     : std::max<int64_t>(1, std::thread::hardware_concurrency());

  // Memory accounts -> KV blocks.
  KVS_ASSIGN_OR_RETURN(DType kv_dtype, plan::ParseKvDType(config.kv_cache.dtype));
  KVS_ASSIGN_OR_RETURN(plan::ModelShape shape, plan::ShapeFromGgufFile(model->file(), config.model.path));
  uint64_t machine = static_cast<uint64_t>(config.kv_cache.memory_limit_bytes);
  if (machine == 0) {
    KVS_ASSIGN_OR_RETURN(machine, plan::SystemMemoryBytes());
  }
  b->weights_bytes_ = model->weight_bytes();
  b->activation_bytes_ = plan::ActivationPeakBytes(shape, config.runtime.max_num_batched_tokens,
                                                   config.runtime.max_batch_size, context, threads);
  b->overhead_bytes_ = plan::RuntimeOverheadBytes(threads);
  const uint64_t pool = plan::KvPoolBytes(machine, config.kv_cache.memory_fraction, b->weights_bytes_,
                                          b->activation_bytes_, b->overhead_bytes_);
  const uint64_t per_block = plan::KvBytesPerBlock(shape, kv_dtype, block);
  const int64_t per_sequence = plan::KvBlocksForTokens(context, block);
  const int64_t useful = per_sequence * config.runtime.max_concurrent_requests;
  const int64_t fit = per_block > 0 ? static_cast<int64_t>(pool / per_block) : 0;
  const int64_t num_blocks = std::min(fit, useful);
  if (num_blocks < per_sequence) {
    return FailedPrecondition(
        "the KV pool would hold {} blocks ({} of {} of memory at kv_cache.memory_fraction {} after weights {} "
        "and activations {}), fewer than the {} blocks one {}-token request needs; raise kv_cache.memory_fraction or "
        "kv_cache.memory_limit_bytes, use kv_cache.dtype q8_0, or lower model.max_context_length "
        "(`kvserve plan --model FILE --context N` shows what fits)",
        fit, plan::FormatBinary(pool), plan::FormatBinary(machine), config.kv_cache.memory_fraction,
        plan::FormatBinary(b->weights_bytes_), plan::FormatBinary(b->activation_bytes_), per_sequence, context);
  }
  b->kv_pool_bytes_ = static_cast<uint64_t>(num_blocks) * per_block;

  backend::CpuRunnerOptions ro;
  ro.threads = static_cast<int>(config.runtime.threads);
  ro.block_size = static_cast<int32_t>(block);
  ro.num_blocks = static_cast<int32_t>(num_blocks);
  ro.kv_dtype = kv_dtype;
  ro.max_batch_tokens = std::max(config.runtime.max_num_batched_tokens, config.runtime.max_batch_size);
  auto runner = backend::CpuRunner::Create(std::move(model), ro);
  if (!runner.ok()) return runner.status();

  engine::EngineConfig ec;
  ec.max_num_batched_tokens = static_cast<int32_t>(config.runtime.max_num_batched_tokens);
  ec.max_batch_size = static_cast<int32_t>(config.runtime.max_batch_size);
  ec.max_context_length = static_cast<int32_t>(context);
  ec.max_queued_requests = static_cast<int32_t>(std::max<int64_t>(config.runtime.max_concurrent_requests, 1));
  ec.enable_prefix_caching = config.kv_cache.prefix_caching;
  ec.output_reservation = config.runtime.output_reservation;
  ec.policy = config.runtime.scheduling_policy == "priority" ? engine::SchedulingPolicy::kPriority
                                                              : engine::SchedulingPolicy::kFcfs;
  ec.eos_token_ids = b->tok_->end_of_generation_ids();
  auto eng = engine::Engine::Create(ec, std::move(*runner));
  if (!eng.ok()) return eng.status();
  b->engine_ = std::move(*eng);
  KVS_RETURN_IF_ERROR(b->engine_->Start());

  b->info_.name = config.model.name;  // "": the service derives it from the path
  b->info_.path = config.model.path;
  b->info_.architecture = mc.arch;
  b->info_.max_context_length = context;
  b->info_.trained_context_length = mc.context_length;
  b->info_.vocab_size = b->tok_->vocab_size();
  spdlog::info("engine: {} KV blocks of {} tokens ({}), {} threads, context {}", num_blocks, block,
               plan::FormatBinary(b->kv_pool_bytes_), threads, context);
  spdlog::info("memory plan: limit {} x memory_fraction {} = {}; weights {}, KV pool {} ({} per token, {}), "
               "activations {}; {} request(s) of {} tokens fit at once",
               plan::FormatBinary(machine), config.kv_cache.memory_fraction,
               plan::FormatBinary(static_cast<uint64_t>(static_cast<double>(machine) * config.kv_cache.memory_fraction)),
               plan::FormatBinary(b->weights_bytes_), plan::FormatBinary(b->kv_pool_bytes_),
               plan::FormatBinary(per_block / static_cast<uint64_t>(block)), config.kv_cache.dtype,
               plan::FormatBinary(b->activation_bytes_), fit / per_sequence, context);
  b->pump_ = std::thread([raw = b.get()] { raw->Pump(); });
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

StatusOr<std::string> EngineBackend::ApplyChatTemplate(const nlohmann::ordered_json& messages,
                                                       const nlohmann::ordered_json& tools,
                                                       bool add_generation_prompt) {
  tmpl::ChatRequest r;
  r.messages = messages;
  if (tools.is_array() && !tools.empty()) r.tools = tools;
  r.add_generation_prompt = add_generation_prompt;
  tmpl::SetSpecialTokens(*tok_, &r);
  auto text = template_->Render(r);
  if (!text.ok()) return InvalidArgument("{}", text.status().message());
  return text;
}

Status EngineBackend::Submit(GenerateRequest request, ChunkCallback on_chunk) {
  engine::Request r;
  r.request_id = request.request_id;
  r.prompt_token_ids = std::move(request.prompt_tokens);
  r.cache_salt = std::move(request.cache_salt);
  r.priority = request.priority;
  engine::SamplingParams& p = r.sampling;
  p.temperature = request.temperature;
  p.top_k = request.top_k;
  p.top_p = request.top_p;
  p.min_p = request.min_p;
  p.repetition_penalty = request.repetition_penalty;
  p.presence_penalty = request.presence_penalty;
  p.frequency_penalty = request.frequency_penalty;
  p.seed = request.seed;
  p.max_tokens = request.max_tokens;
  p.stop_token_ids = request.stop_token_ids;
  p.ignore_eos = request.ignore_eos;
  p.logprobs = request.logprobs;
  auto live = std::make_shared<Live>();
  live->cb = std::move(on_chunk);
  live->logprobs = request.logprobs.has_value();
  live->decoder = std::make_unique<tok::IncrementalDecoder>(*tok_, /*skip_special=*/true, /*at_sequence_start=*/false);
  // Register before submitting so the pump can never miss the stream; the
  // stream itself is attached under the same lock.
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status(StatusCode::kUnavailable, "the engine is shutting down");
  auto stream = engine_->Submit(std::move(r));
  if (!stream.ok()) return stream.status();
  live->stream = std::move(*stream);
  live_[request.request_id] = std::move(live);
  cv_.notify_one();
  return Status::Ok();
}

void EngineBackend::Cancel(const std::string& request_id) {
  Status s = engine_->Cancel(request_id);  // NotFound: it already finished
  (void)s;
}

bool EngineBackend::Poll(Live& live) {
  auto c = live.stream->Next(std::chrono::milliseconds(0));
  if (!c.ok()) return false;  // DeadlineExceeded: nothing new
  GenerationChunk out;
  out.tokens.reserve(c->token_ids.size());
  for (size_t i = 0; i < c->token_ids.size(); ++i) {
    const int32_t id = c->token_ids[i];
    TokenOutput t;
    t.token_id = id;
    t.text = live.decoder->Add(id);
    t.piece = tok_->TokenPiece(id);
    if (live.logprobs && i < c->logprobs.size()) {
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
  if (c->finished()) {
    out.finish = FromEngine(c->finish_reason);
    out.error = c->error;
    out.text_tail = live.decoder->Flush();
    live.done = true;
  }
  live.cb(std::move(out));
  if (live.done) live.cb = nullptr;
  return true;
}

void EngineBackend::Pump() {
  std::vector<std::pair<std::string, std::shared_ptr<Live>>> snapshot;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !live_.empty() || stopping_; });
      if (live_.empty() && stopping_) return;
      snapshot.assign(live_.begin(), live_.end());
    }
    bool progressed = false;
    std::vector<std::string> finished;
    for (auto& [id, live] : snapshot) {
      if (Poll(*live)) progressed = true;
      if (live->done) finished.push_back(id);
    }
    snapshot.clear();
    if (!finished.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& id : finished) live_.erase(id);
    }
    if (!progressed) std::this_thread::sleep_for(kPumpNap);
  }
}

BackendStats EngineBackend::Stats() {
  const engine::EngineStats e = engine_->GetStats();
  BackendStats s;
  s.num_running = e.num_running;
  s.num_waiting = e.num_waiting;
  s.kv_block_size = e.block_size;
  s.kv_blocks_total = e.num_blocks_total;
  s.kv_blocks_used = e.num_blocks_used;
  s.kv_blocks_cached = e.num_blocks_cached;
  s.kv_blocks_free = e.num_blocks_free;
  s.weights_bytes = weights_bytes_;
  s.kv_pool_bytes = kv_pool_bytes_;
  s.activation_bytes = activation_bytes_;
  s.overhead_bytes = overhead_bytes_;
  s.max_admissible_context =
      std::min<int64_t>(info_.max_context_length, static_cast<int64_t>(e.num_blocks_free + e.num_blocks_cached) * e.block_size);
  s.prefix_cache_queried_tokens = e.prefix_query_tokens;
  s.prefix_cache_hit_tokens = e.prefix_hit_tokens;
  s.num_preemptions = e.num_preemptions;
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
  // Every live request gets its final chunk (kError: the engine stopped);
  // the pump delivers them and exits when none is left.
  if (engine_) engine_->Stop();
  cv_.notify_all();
  if (pump_.joinable()) pump_.join();
}

}  // namespace kvs::server
