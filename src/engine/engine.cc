#include "engine/engine.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace kvs::engine {
namespace {

// The config against the runner, and the draft model's runner against both.
Status ValidateWithDraft(const EngineConfig& config, const ModelRunner& runner, const ModelRunner* draft) {
  KVS_RETURN_IF_ERROR(config.Validate(runner));
  const bool wants_draft = config.speculative.method == SpeculativeConfig::Method::kDraft;
  if (wants_draft && draft == nullptr) {
    return InvalidArgument("speculative.method draft needs a draft model (speculative.draft_model)");
  }
  if (!wants_draft && draft != nullptr) {
    return InvalidArgument("a draft model was given but speculative.method is not draft");
  }
  if (draft == nullptr) return Status::Ok();
  return DraftModel::Check(runner, *draft);
}

EngineConfig Checked(EngineConfig config, const ModelRunner* runner, const ModelRunner* draft) {
  KVS_CHECK(runner != nullptr);
  const Status st = ValidateWithDraft(config, *runner, draft);
  KVS_CHECK_MSG(st.ok(), "invalid engine config: {}", st.ToString());
  return config;
}

SchedulerConfig MakeSchedulerConfig(const EngineConfig& c, int32_t num_blocks) {
  SchedulerConfig s;
  s.max_num_batched_tokens = c.max_num_batched_tokens;
  s.max_prefill_tokens_while_decoding = c.max_prefill_tokens_while_decoding;
  s.max_batch_size = c.max_batch_size;
  s.policy = c.policy;
  s.watermark_blocks = static_cast<int32_t>(c.admission_watermark * num_blocks);
  s.output_reservation = c.output_reservation;
  s.eos_token_ids = c.eos_token_ids;
  s.max_context_length = c.max_context_length;
  return s;
}

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

Status EngineConfig::Validate(const ModelRunner& runner) const {
  if (runner.vocab_size() <= 0 || runner.block_size() <= 0 || runner.num_blocks() <= 0) {
    return InvalidArgument("model runner reports vocab_size {}, block_size {}, num_blocks {}; all must be > 0",
                           runner.vocab_size(), runner.block_size(), runner.num_blocks());
  }
  if (max_num_batched_tokens < 1) {
    return InvalidArgument("max_num_batched_tokens must be >= 1, got {}", max_num_batched_tokens);
  }
  if (max_prefill_tokens_while_decoding < 0) {
    return InvalidArgument("max_prefill_tokens_while_decoding must be >= 0, got {}", max_prefill_tokens_while_decoding);
  }
  if (max_batch_size < 1 || max_batch_size > max_num_batched_tokens) {
    return InvalidArgument("max_batch_size must be in [1, max_num_batched_tokens = {}], got {}",
                           max_num_batched_tokens, max_batch_size);
  }
  if (max_context_length < 2) return InvalidArgument("max_context_length must be >= 2, got {}", max_context_length);
  if (max_queued_requests < 1) {
    return InvalidArgument("max_queued_requests must be >= 1, got {}", max_queued_requests);
  }
  for (int32_t id : eos_token_ids) {
    if (id < 0 || id >= runner.vocab_size()) {
      return InvalidArgument("eos token id {} is outside the vocabulary [0, {})", id, runner.vocab_size());
    }
  }
  if (!(admission_watermark >= 0.0 && admission_watermark < 1.0)) {
    return InvalidArgument("admission_watermark must be in [0, 1), got {}", admission_watermark);
  }
  if (!(output_reservation >= 0.0 && output_reservation <= 1.0)) {
    return InvalidArgument("output_reservation must be in [0, 1], got {}", output_reservation);
  }
  if (std::isnan(kv_release_idle_s)) return InvalidArgument("kv_release_idle_s must be a number");
  if (!kv_disk.path.empty()) {
    if (!enable_prefix_caching) {
      return InvalidArgument("kv_cache.disk needs prefix caching: the disk tier keeps the prefix cache's blocks");
    }
    if (runner.block_bytes() == 0) {
      return InvalidArgument("kv_cache.disk: this model's runner cannot copy its KV blocks (a model with sliding-window "
                             "layers keeps them in two groups); leave kv_cache.disk.path empty");
    }
  }
  KVS_RETURN_IF_ERROR(speculative.Validate());
  if (speculative.enabled() && runner.window() > 0) {
    return InvalidArgument("speculative decoding is not available for models with sliding-window layers yet; "
                           "set speculative.method off");
  }
  if (runner.window() > 0) {
    // One sequence alone must always fit its window plus a whole chunk.
    const int32_t need = WindowBlocksPerSequence(runner.window(), max_num_batched_tokens, runner.block_size());
    if (runner.num_window_blocks() < need) {
      return InvalidArgument(
          "the sliding-window KV group has {} blocks, fewer than the {} one sequence needs (window {} + "
          "max_num_batched_tokens {}, blocks of {})",
          runner.num_window_blocks(), need, runner.window(), max_num_batched_tokens, runner.block_size());
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Engine>> Engine::Create(EngineConfig config, std::unique_ptr<ModelRunner> runner,
                                                 std::unique_ptr<ModelRunner> draft_runner) {
  if (runner == nullptr) return InvalidArgument("no model runner");
  KVS_RETURN_IF_ERROR(ValidateWithDraft(config, *runner, draft_runner.get()));
  std::unique_ptr<kvcache::DiskKvStore> store;
  if (!config.kv_disk.path.empty()) {
    // The bytes of a block mean something only for this model (the
    // caller's fingerprint), this block size and this storage layout.
    kvcache::DiskStoreConfig dc = config.kv_disk;
    const uint64_t layout[3] = {dc.fingerprint, static_cast<uint64_t>(runner->block_size()),
                                static_cast<uint64_t>(runner->block_bytes())};
    dc.fingerprint = XXH3_64bits(layout, sizeof layout);
    KVS_ASSIGN_OR_RETURN(store, kvcache::DiskKvStore::Open(dc));
  }
  auto engine = std::make_unique<Engine>(std::move(config), std::move(runner), std::move(draft_runner));
  if (store) {
    engine->disk_store_ = std::move(store);
    engine->disk_tier_ = std::make_unique<DiskTier>(engine->runner_.get(), engine->disk_store_.get());
    engine->block_manager_.set_tier(engine->disk_tier_.get());
    // Routers see the disk's blocks as the cache-event log's kDisk group.
    kvcache::PrefixCacheEvents* events = &engine->cache_events_;
    engine->disk_store_->SetIndexListener([events](const kvcache::BlockHash& h, bool held) {
      if (held) {
        events->Stored(h, kvcache::CacheGroup::kDisk);
      } else {
        events->Evicted(h, kvcache::CacheGroup::kDisk);
      }
    });
    engine->PublishStats();
  }
  return engine;
}

Engine::Engine(EngineConfig config, std::unique_ptr<ModelRunner> runner, std::unique_ptr<ModelRunner> draft_runner)
    : config_(Checked(std::move(config), runner.get(), draft_runner.get())),
      runner_(std::move(runner)),
      draft_(draft_runner ? std::make_unique<DraftModel>(std::move(draft_runner), config_.max_num_batched_tokens)
                          : nullptr),
      vocab_size_(runner_->vocab_size()),
      block_size_(runner_->block_size()),
      num_blocks_(runner_->num_blocks()),
      block_manager_(num_blocks_, block_size_, config_.enable_prefix_caching,
                     WindowGroupConfig{runner_->num_window_blocks(), runner_->window()}),
      scheduler_(MakeSchedulerConfig(config_, num_blocks_), &block_manager_),
      sampler_(vocab_size_),
      seed_rng_(config_.seed ? *config_.seed : std::random_device{}()),
      logits_(static_cast<size_t>(config_.max_batch_size) * static_cast<size_t>(vocab_size_)),
      inbox_(config_.max_queued_requests) {
  if (config_.enable_prefix_caching) block_manager_.set_events(&cache_events_);
  PublishStats();
}

Engine::~Engine() { Stop(); }

Status Engine::Start() {
  if (started_ || stopped_) return FailedPrecondition("Engine::Start: the engine was already started or stopped");
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Engine::Stop() {
  if (stopped_) return;
  stopped_ = true;
  inbox_.Close();
  if (thread_.joinable()) thread_.join();
  // The engine thread is gone: this thread owns the engine state now.
  ProcessInbox();  // so that requests still in the inbox end too
  FinishAll(FinishReason::kError, Status(StatusCode::kUnavailable, "the engine stopped"));
  PublishStats();
}

void Engine::Loop() {
  while (inbox_.WaitForWork(scheduler_.HasWork(), NextKvRelease())) StepOnce();
}

bool Engine::Step() {
  KVS_CHECK_MSG(!started_, "Engine::Step is for engines that were not started");
  return StepOnce();
}

// The whole algorithm of one step.
bool Engine::StepOnce() {
  ProcessInbox();                                       // new requests in, cancels applied
  ReleaseIdleKv();                                      // long-free KV blocks give their memory back
  ProposeDrafts();                                      // speculative decoding: n-gram drafts per decode
  const SchedulerOutput& plan = scheduler_.Schedule();  // decodes (+ drafts) + prefill chunks, KV blocks allocated
  if (plan.empty()) {
    PublishStats();
    return false;
  }
  Status st = draft_ ? draft_->Run(plan) : Status::Ok();  // a draft model: catch up, fill the drafts
  if (st.ok()) st = Forward(plan);                      // the runner writes KV and logits
  if (!st.ok()) {
    FailBatch(plan, st);
  } else {
    SampleTokens(plan);                                 // a token for each sequence whose chunk ends it
                                                        // (drafts: those accepted, then one more)
    scheduler_.Postprocess(plan, std::span(emitted_).first(plan.seqs.size()));  // commit KV, append tokens, stops, free
    FinishConstrained(plan);                            // grammar completed or failed
    EmitOutputs(plan);                                  // stream the tokens; retire finished requests
  }
  PublishStats();
  return true;
}

std::optional<Clock::time_point> Engine::NextKvRelease() const {
  if (config_.kv_release_idle_s < 0) return std::nullopt;
  const std::optional<Clock::time_point> oldest = block_manager_.OldestDirtyFree();
  if (!oldest) return std::nullopt;
  return *oldest + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.kv_release_idle_s));
}

void Engine::ReleaseIdleKv() {
  const std::optional<Clock::time_point> due = NextKvRelease();
  const Clock::time_point now = Clock::now();
  if (!due || *due > now) return;
  const auto idle = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.kv_release_idle_s));
  // Strictly before the cutoff, so kv_release_idle_s = 0 releases all free ones.
  const Clock::time_point cutoff = now - idle + Clock::duration(1);
  const std::vector<int32_t> ids = block_manager_.TakeIdleFree(cutoff);
  if (!ids.empty()) runner_->ReleaseBlocks(ids);
  if (!ids.empty() && draft_) draft_->runner().ReleaseBlocks(ids);  // the same ids hold its KV
  counters_.num_blocks_released += static_cast<int64_t>(ids.size());
  if (!block_manager_.has_window()) return;
  const std::vector<int32_t> window_ids = block_manager_.TakeIdleFree(cutoff, KvGroup::kWindow);
  if (!window_ids.empty()) runner_->ReleaseWindowBlocks(window_ids);
  counters_.num_window_blocks_released += static_cast<int64_t>(window_ids.size());
}

StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(Request request) {
  KVS_ASSIGN_OR_RETURN(ValidatedRequest v, ValidatedRequest::Validate(std::move(request), limits()));
  return Submit(std::move(v));
}

StatusOr<std::shared_ptr<RequestStream>> Engine::Submit(ValidatedRequest request) {
  const RequestLimits mine = limits();
  if (!(request.limits() == mine)) {
    // Validated for another engine's limits (a caller that kept a request
    // across an engine swap): what held there may not hold here.
    KVS_ASSIGN_OR_RETURN(request, ValidatedRequest::Validate(std::move(request).Release(), mine));
  }
  // Trusted, not re-validated: only the invariants the engine's arithmetic
  // depends on, at O(1).
  const Request& r = request.request();
  const auto num_prompt = static_cast<int64_t>(r.prompt_token_ids.size());
  KVS_CHECK(num_prompt > 0 && r.sampling.max_tokens >= 1);
  KVS_CHECK(num_prompt + r.sampling.max_tokens <= mine.max_context_length);
  return inbox_.Push(std::move(request).Release());
}

RequestLimits Engine::limits() const {
  RequestLimits l;
  l.vocab_size = vocab_size_;
  l.max_context_length = config_.max_context_length;
  l.block_size = block_size_;
  l.num_blocks = num_blocks_;
  return l;
}

Status Engine::Cancel(const std::string& request_id) { return inbox_.Cancel(request_id); }

void Engine::ProcessInbox() {
  inbox_.Drain(&inbox_requests_, &inbox_cancels_);
  for (PendingRequest& p : inbox_requests_) AddRequest(std::move(p));
  inbox_requests_.clear();
  for (const std::string& id : inbox_cancels_) {
    const auto it = by_id_.find(id);
    if (it != by_id_.end()) CancelRequest(it->second);
  }
  if (config_.cancel_abandoned_requests) {
    // use_count() == 1: only the engine still holds the stream.
    std::vector<int64_t> abandoned;
    for (const auto& [seq_id, live] : live_) {
      if (live.stream.use_count() == 1) abandoned.push_back(seq_id);
    }
    for (int64_t seq_id : abandoned) CancelRequest(seq_id);
  }
}

void Engine::AddRequest(PendingRequest p) {
  Request& r = p.request;
  auto seq = std::make_unique<Sequence>(next_seq_id_++, r.request_id, std::move(r.prompt_token_ids),
                                        std::move(r.sampling));
  seq->priority = r.priority;
  seq->cache_salt = std::move(r.cache_salt);
  seq->arrival_time = p.arrival_time;
  seq->rng.seed(seq->params.seed ? *seq->params.seed : seed_rng_());
  if (r.grammar) seq->matcher = std::make_unique<grammar::GrammarMatcher>(std::move(r.grammar));
  // Blocks it will restore from the disk tier are read ahead while it waits.
  block_manager_.PrefetchTier(*seq);  // nothing without a tier
  scheduler_.Add(seq.get());
  by_id_.emplace(seq->request_id, seq->seq_id);
  const int64_t seq_id = seq->seq_id;
  live_.emplace(seq_id, Live{std::move(seq), std::move(p.stream), true});
}

void Engine::CancelRequest(int64_t seq_id) {
  Sequence* seq = live_.at(seq_id).seq.get();
  scheduler_.Finish(seq, FinishReason::kCancelled);
  StreamChunk chunk;
  Retire(seq_id, std::move(chunk));
}

void Engine::ProposeDrafts() {
  const SpeculativeConfig& sc = config_.speculative;
  if (!sc.enabled()) return;
  if (draft_) draft_->BeginStep();
  for (Sequence* seq : scheduler_.running()) {
    seq->spec_tokens.clear();
    if (seq->num_uncomputed_tokens() != 1 || !seq->params.speculative || !Sampler::CanVerifyDrafts(*seq)) continue;
    // Every draft and the token after them must fit max_tokens and the context.
    const int32_t room = std::min(seq->params.max_tokens - seq->num_output_tokens(),
                                  config_.max_context_length - seq->num_tokens()) - 1;
    const int32_t budget = std::min(seq->spec.Budget(sc.num_tokens), room);
    if (budget <= 0) continue;
    if (draft_) {
      draft_->Plan(*seq, budget);  // placeholders the draft model fills after the schedule, or a catch-up
      continue;
    }
    seq->spec_tokens.push_back(seq->token_ids.back());
    if (ProposeNgram(seq->token_ids, sc.ngram_min, sc.ngram_max, budget, &seq->spec_tokens) == 0) {
      seq->spec_tokens.clear();
    }
  }
}

Status Engine::Forward(const SchedulerOutput& plan) {
  batch_.seqs.clear();
  for (const ScheduledSeq& s : plan.seqs) {
    const Sequence& seq = *s.seq;
    ForwardSeq f;
    f.seq_id = seq.seq_id;
    if (s.num_draft_tokens > 0) {
      // [last token, drafts...], every position's logits to verify them.
      KVS_CHECK(seq.spec_tokens.size() == static_cast<size_t>(s.num_new_tokens));
      f.tokens = seq.spec_tokens;
      f.all_logits = true;
      f.decode_rows = true;
    } else {
      f.tokens = std::span<const int32_t>(seq.token_ids)
                     .subspan(static_cast<size_t>(seq.num_computed_tokens), static_cast<size_t>(s.num_new_tokens));
    }
    f.start_pos = seq.num_computed_tokens;
    f.block_table = seq.block_table;
    f.window_block_table = seq.window_block_table;
    f.want_logits = s.samples();
    batch_.seqs.push_back(f);
  }
  const auto num_logits = static_cast<size_t>(batch_.NumLogits());
  // Verification chunks want a row per token: grown on first need, at most
  // min(max_num_batched_tokens, max_batch_size * (1 + num_tokens)) rows.
  if (logits_.size() < num_logits * static_cast<size_t>(vocab_size_)) {
    logits_.resize(num_logits * static_cast<size_t>(vocab_size_));
  }
  counters_.num_computed_tokens += plan.num_tokens;
  ++counters_.num_steps;
  ++counters_.step_tokens[static_cast<size_t>(
      std::lower_bound(kStepTokenBounds.begin(), kStepTokenBounds.end(), plan.num_tokens) - kStepTokenBounds.begin())];
  counters_.num_blocks_used_peak = std::max(counters_.num_blocks_used_peak, block_manager_.num_used());
  if (block_manager_.has_window()) {
    counters_.num_window_blocks_used_peak =
        std::max(counters_.num_window_blocks_used_peak, block_manager_.pool(KvGroup::kWindow).num_used());
  }
  const auto t0 = Clock::now();
  Status st = runner_->Forward(batch_, std::span<float>(logits_).first(num_logits * static_cast<size_t>(vocab_size_)));
  counters_.forward_seconds += Seconds(t0, Clock::now());
  return st;
}

void Engine::SampleTokens(const SchedulerOutput& plan) {
  if (emitted_.size() < plan.seqs.size()) emitted_.resize(plan.seqs.size());
  sample_results_.resize(plan.seqs.size());
  size_t row = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& s = plan.seqs[i];
    std::vector<int32_t>& out = emitted_[i];
    out.clear();
    sample_results_[i] = SampleResult{};
    if (s.num_draft_tokens > 0) {
      VerifyDrafts(s, row, out);
      row += static_cast<size_t>(s.num_new_tokens);
      continue;
    }
    if (!s.samples()) continue;
    const auto logits = std::span<const float>(logits_).subspan(row++ * static_cast<size_t>(vocab_size_),
                                                                static_cast<size_t>(vocab_size_));
    sample_results_[i] = sampler_.Sample(logits, *s.seq);
    out.push_back(sample_results_[i].token_id);
  }
}

void Engine::VerifyDrafts(const ScheduledSeq& s, size_t first_row, std::vector<int32_t>& out) {
  Sequence& seq = *s.seq;
  const auto vocab = static_cast<size_t>(vocab_size_);
  const auto row = [&](size_t r) { return std::span<const float>(logits_).subspan((first_row + r) * vocab, vocab); };
  // Row r holds the logits after spec_tokens[r]: they judge draft r + 1.
  int32_t accepted = 0;
  for (int32_t d = 1; d <= s.num_draft_tokens; ++d) {
    bool ok = false;
    const SampleResult r = sampler_.AcceptDraft(row(static_cast<size_t>(d - 1)), seq, seq.spec_tokens[static_cast<size_t>(d)], &ok);
    out.push_back(r.token_id);
    if (!ok) break;  // r is the correction: drawn from p without the draft
    ++accepted;
  }
  // All drafts held: the bonus token from the last row.
  if (accepted == s.num_draft_tokens) out.push_back(sampler_.Sample(row(static_cast<size_t>(accepted)), seq).token_id);
  seq.spec.Update(s.num_draft_tokens, accepted, config_.speculative.num_tokens);
  if (draft_) DraftModel::Verified(seq, s.num_draft_tokens, accepted);
  counters_.num_draft_tokens += s.num_draft_tokens;
  counters_.num_accepted_draft_tokens += accepted;
  ++counters_.num_spec_verifications;
}

void Engine::FinishConstrained(const SchedulerOutput& plan) {
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    if (emitted_[i].empty()) continue;
    Sequence* seq = plan.seqs[i].seq;
    const SampleResult& r = sample_results_[i];
    if (seq->is_finished()) continue;
    if (!r.error.ok()) {
      seq->error = r.error;
      scheduler_.Finish(seq, FinishReason::kError);
    } else if (r.grammar_done) {
      // The grammar's stop token (not one of the engine's EOS ids); a
      // constrained sequence has no drafts, so it is the one token.
      seq->stop_token_id = emitted_[i].back();
      scheduler_.Finish(seq, FinishReason::kStop);
    }
  }
}

void Engine::EmitOutputs(const SchedulerOutput& plan) {
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    Sequence& seq = *plan.seqs[i].seq;
    Live& live = live_.at(seq.seq_id);
    if (live.queued) {
      inbox_.OnAdmitted();
      live.queued = false;
    }
    const std::vector<int32_t>& tokens = emitted_[i];  // what Postprocess appended
    if (tokens.empty()) continue;
    counters_.num_generated_tokens += static_cast<int64_t>(tokens.size());
    if (!seq.first_token_time) seq.first_token_time = now;
    StreamChunk chunk;
    // The stop token that ended the sequence is not output.
    const bool hit_stop = seq.is_finished() && seq.stop_token_id == tokens.back();
    const bool failed = !sample_results_[i].error.ok();  // its token is a placeholder
    const size_t shown = failed ? 0 : tokens.size() - (hit_stop ? 1 : 0);
    for (size_t t = 0; t < shown; ++t) {
      chunk.token_ids.push_back(tokens[t]);
      chunk.token_times_s.push_back(Seconds(seq.arrival_time, now));
    }
    if (shown > 0 && seq.params.logprobs) {  // no drafts with logprobs: one token
      SampleResult& r = sample_results_[i];
      chunk.logprobs.push_back({r.logprob, std::move(r.top)});
    }
    if (seq.is_finished()) {
      Retire(seq.seq_id, std::move(chunk));
    } else {
      FillUsage(seq, chunk);
      live.stream->Push(std::move(chunk));
    }
  }
}

void Engine::FailBatch(const SchedulerOutput& plan, const Status& status) {
  // Copy: finishing sequences does not touch the plan, but retiring frees them.
  std::vector<int64_t> ids;
  for (const ScheduledSeq& s : plan.seqs) ids.push_back(s.seq->seq_id);
  for (int64_t seq_id : ids) {
    Sequence* seq = live_.at(seq_id).seq.get();
    seq->error = status.WithContext("model forward pass failed");
    scheduler_.Finish(seq, FinishReason::kError);
    Retire(seq_id, StreamChunk{});
  }
}

void Engine::FinishAll(FinishReason reason, const Status& status) {
  std::vector<int64_t> ids;
  for (const auto& [seq_id, live] : live_) ids.push_back(seq_id);
  std::sort(ids.begin(), ids.end());
  for (int64_t seq_id : ids) {
    Sequence* seq = live_.at(seq_id).seq.get();
    seq->error = status;
    scheduler_.Finish(seq, reason);
    Retire(seq_id, StreamChunk{});
  }
}

void Engine::Retire(int64_t seq_id, StreamChunk chunk) {
  const auto it = live_.find(seq_id);
  KVS_CHECK(it != live_.end());
  Live& live = it->second;
  const Sequence& seq = *live.seq;
  KVS_CHECK(seq.is_finished() && seq.finish_reason.has_value());
  chunk.finish_reason = *seq.finish_reason;
  chunk.stop_token_id = seq.stop_token_id;
  if (chunk.finish_reason == FinishReason::kError) chunk.error = seq.error;
  FillUsage(seq, chunk);
  chunk.timings.e2e_s = Seconds(seq.arrival_time, Clock::now());
  switch (chunk.finish_reason) {
    case FinishReason::kStop: ++counters_.num_finished_stop; break;
    case FinishReason::kLength: ++counters_.num_finished_length; break;
    case FinishReason::kCancelled: ++counters_.num_finished_cancelled; break;
    case FinishReason::kError: ++counters_.num_finished_error; break;
    case FinishReason::kNone: KVS_CHECK(false);
  }
  live.stream->Push(std::move(chunk));
  inbox_.OnRetired(seq.request_id, live.queued);
  by_id_.erase(seq.request_id);
  live_.erase(it);
}

void Engine::FillUsage(const Sequence& seq, StreamChunk& chunk) const {
  chunk.num_prompt_tokens = seq.num_prompt_tokens;
  chunk.num_output_tokens = seq.num_output_tokens();
  chunk.num_cached_tokens = seq.num_cached_tokens;
  chunk.num_computed_prompt_tokens = seq.num_computed_prompt_tokens;
  chunk.num_preemptions = seq.num_preemptions;
  if (seq.first_scheduled_time) chunk.timings.queue_time_s = Seconds(seq.arrival_time, *seq.first_scheduled_time);
  if (seq.first_token_time) chunk.timings.ttft_s = Seconds(seq.arrival_time, *seq.first_token_time);
}

void Engine::PublishStats() {
  EngineStats s = counters_;
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  s.block_size = block_size_;
  s.num_blocks_total = num_blocks_;
  s.num_blocks_used = block_manager_.num_used();
  s.num_blocks_cached = block_manager_.num_cached();
  s.num_blocks_free = block_manager_.num_free();
  s.kv_slots_allocated = static_cast<int64_t>(s.num_blocks_used) * block_size_;
  s.kv_committed_bytes = runner_->kv_committed_bytes();
  if (draft_) {
    s.kv_committed_bytes += draft_->runner().kv_committed_bytes();
    s.draft_forward_seconds = draft_->forward_seconds();
    s.num_draft_model_tokens = draft_->num_tokens_computed();
  }
  if (disk_tier_) {
    s.kv_disk_enabled = true;
    s.prefix_disk_hit_tokens = block_manager_.num_tier_hit_tokens();
    s.kv_disk_restored_blocks = disk_tier_->restored_blocks();
    s.kv_disk_restore_seconds = disk_tier_->restore_seconds();
    s.kv_disk = disk_store_->stats();
  }
  for (const Sequence* seq : scheduler_.running()) {
    s.kv_slots_unwritten += static_cast<int64_t>(seq->block_table.size()) * block_size_ - seq->num_computed_tokens;
  }
  if (block_manager_.has_window()) {
    const BlockPool& w = block_manager_.pool(KvGroup::kWindow);
    s.window = block_manager_.window();
    s.num_window_blocks_total = w.num_blocks();
    s.num_window_blocks_used = w.num_used();
    s.num_window_blocks_cached = w.num_cached();
    s.num_window_blocks_free = w.num_free();
  }
  s.max_admissible_tokens = block_manager_.MaxAdmissibleTokens(config_.max_num_batched_tokens);
  s.prefix_query_tokens = block_manager_.num_query_tokens();
  s.prefix_hit_tokens = block_manager_.num_hit_tokens() + block_manager_.num_tier_hit_tokens();
  s.num_preemptions = scheduler_.num_preemptions();
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = s;
}

EngineStats Engine::GetStats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    s = stats_;
  }
  s.num_waiting += inbox_.num_pending();
  return s;
}

std::string Engine::TEST_CheckInvariants() const {
  KVS_CHECK(!thread_.joinable());
  if (std::string e = block_manager_.CheckInvariants(); !e.empty()) return e;
  std::map<int32_t, int32_t> refs, window_refs;
  const bool windowed = block_manager_.has_window();
  for (const auto& [seq_id, live] : live_) {
    const Sequence& seq = *live.seq;
    if (seq.is_finished()) return fmt::format("finished sequence {} is still live", seq.request_id);
    for (int32_t b : seq.block_table) ++refs[b];
    if (!windowed && !seq.window_block_table.empty()) return fmt::format("{}: window table without a window group", seq.request_id);
    if (windowed && seq.window_block_table.size() != seq.block_table.size()) {
      return fmt::format("{}: window table has {} entries, block table {}", seq.request_id,
                         seq.window_block_table.size(), seq.block_table.size());
    }
    for (size_t i = 0; i < seq.window_block_table.size(); ++i) {
      const int32_t b = seq.window_block_table[i];
      if ((b < 0) != (static_cast<int32_t>(i) < seq.num_window_dropped)) {
        return fmt::format("{}: window entry {} is {} but {} are dropped", seq.request_id, i, b, seq.num_window_dropped);
      }
      if (b >= 0) ++window_refs[b];
    }
    if (windowed && seq.status == SequenceStatus::kRunning &&
        seq.num_window_dropped != block_manager_.FirstWindowBlock(seq.num_computed_tokens)) {
      return fmt::format("{}: {} window blocks dropped, {} are out of the window", seq.request_id,
                         seq.num_window_dropped, block_manager_.FirstWindowBlock(seq.num_computed_tokens));
    }
    const size_t needed = static_cast<size_t>(NumBlocksFor(seq.num_computed_tokens, block_size_));
    if (seq.block_table.size() < needed) return fmt::format("{}: block table too short", seq.request_id);
    if (seq.num_computed_tokens >= seq.num_tokens()) return fmt::format("{}: last token computed", seq.request_id);
    if (seq.status == SequenceStatus::kWaiting &&
        (!seq.block_table.empty() || !seq.window_block_table.empty() || seq.num_computed_tokens != 0)) {
      return fmt::format("{}: waiting with KV", seq.request_id);
    }
  }
  for (int32_t b = 0; b < num_blocks_; ++b) {
    const auto it = refs.find(b);
    const int32_t expected = it == refs.end() ? 0 : it->second;
    if (block_manager_.ref_count(b) != expected) {
      return fmt::format("block {} has ref count {} but {} block tables hold it", b, block_manager_.ref_count(b),
                         expected);
    }
  }
  if (windowed) {
    for (int32_t b = 0; b < block_manager_.pool(KvGroup::kWindow).num_blocks(); ++b) {
      const auto it = window_refs.find(b);
      const int32_t expected = it == window_refs.end() ? 0 : it->second;
      if (block_manager_.ref_count(b, KvGroup::kWindow) != expected) {
        return fmt::format("window block {} has ref count {} but {} window tables hold it", b,
                           block_manager_.ref_count(b, KvGroup::kWindow), expected);
      }
    }
  }
  const size_t queued = static_cast<size_t>(scheduler_.num_waiting() + scheduler_.num_running());
  if (queued != live_.size()) return fmt::format("{} live requests but {} in the scheduler", live_.size(), queued);
  return "";
}

}  // namespace kvs::engine
