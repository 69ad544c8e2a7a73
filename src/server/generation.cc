#include "server/generation.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/sse.h"

namespace kvs::server {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError ErrorFromStatus(const Status& s) {
  ApiError e;
  e.message = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      e.status = 400;
      e.code = "invalid_value";
      break;
    case StatusCode::kOutOfRange:
      e.status = 400;
      e.code = "context_length_exceeded";
      break;
    case StatusCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      e.retry_after_seconds = 1;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kFailedPrecondition:
      e.status = 503;
      e.type = "service_unavailable";
      e.code = "service_unavailable";
      e.retry_after_seconds = 1;
      break;
    case StatusCode::kUnimplemented:
      e.status = 400;
      e.code = "unsupported_parameter";
      break;
    case StatusCode::kDeadlineExceeded:
      e.status = 504;
      e.type = "timeout_error";
      e.code = "request_timeout";
      break;
    default:
      e.status = 500;
      e.type = "internal_error";
      e.code = "internal_error";
      break;
  }
  return e;
}

namespace {

std::string ClientFinishReason(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    default: return "error";
  }
}

json Bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A quiet stream (a long prefill, a long queue) gets an SSE comment this
// often, so proxies with read timeouts keep it open; clients ignore it.
constexpr std::chrono::seconds kSsePingInterval{15};

}  // namespace

GenerationJob::GenerationJob(JobEnv env, std::shared_ptr<http::Exchange> ex, ParsedRequest req,
                             std::vector<PreparedPrompt> prompts, std::string id, DoneFn done)
    : env_(std::move(env)),
      ex_(std::move(ex)),
      req_(std::move(req)),
      prompts_(std::move(prompts)),
      id_(std::move(id)),
      done_(std::move(done)) {
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  chat_ = req_.endpoint == Endpoint::kChatCompletions;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    for (int i = 0; i < req_.n; ++i) {
      Choice c;
      c.index = static_cast<int>(p) * req_.n + i;
      c.prompt_index = static_cast<int>(p);
      c.backend_id = fmt::format("{}-{}", id_, c.index);
      c.stop = StopMatcher(req_.stop);
      if (req_.echo) {
        c.text = prompts_[p].echo_text;
        c.offset_base = c.text.size();
      }
      choices_.push_back(std::move(c));
    }
  }
}

void GenerationJob::Start() {
  auto self = shared_from_this();
  // Post, never run inline: the close handler may fire inside our own writes.
  ex_->SetCloseHandler([self] { self->ex_->Post([self] { self->OnClientClosed(); }); });
  if (env_.timeout_seconds > 0) {
    const auto deadline =
        ex_->received_at() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(env_.timeout_seconds));
    ex_->SetDeadline(deadline, [self] { self->OnTimeout(); });
  }
  for (Choice& c : choices_) {
    const PreparedPrompt& p = prompts_[c.prompt_index];
    GenerateRequest g;
    g.request_id = c.backend_id;
    g.prompt_tokens = p.tokens;
    g.temperature = req_.temperature;
    g.top_p = req_.top_p;
    g.top_k = req_.top_k;
    g.min_p = req_.min_p;
    g.presence_penalty = req_.presence_penalty;
    g.frequency_penalty = req_.frequency_penalty;
    g.repetition_penalty = req_.repetition_penalty;
    if (req_.seed) g.seed = *req_.seed + static_cast<uint64_t>(c.index % req_.n);  // distinct choices
    g.max_tokens = p.max_tokens;
    g.stop_token_ids = req_.stop_token_ids;
    g.ignore_eos = req_.ignore_eos;
    g.cache_salt = req_.cache_salt;
    g.priority = req_.priority;
    g.logprobs = req_.logprobs;
    const int index = c.index;
    Status st = env_.backend->Submit(std::move(g), [self, index](GenerationChunk chunk) {
      self->ex_->Post([self, index, chunk = std::move(chunk)]() mutable { self->OnChunk(index, std::move(chunk)); });
    });
    if (!st.ok()) {
      spdlog::debug("{}: submit of choice {} failed: {}", id_, index, st.ToString());
      // This choice and the ones after it never reach the backend.
      for (Choice& rest : choices_) {
        if (!rest.submitted) {
          rest.done = true;
          ReleaseSlot(rest);
        }
      }
      // Choices already submitted are cancelled; their slots come back with
      // their final chunks.
      Fail(ErrorFromStatus(st), "error");
      return;
    }
    c.submitted = true;
  }
  env_.metrics->prompt_tokens.Inc([&] {
    double n = 0;
    for (const auto& p : prompts_) n += static_cast<double>(p.tokens.size());
    return n;
  }());
  if (!req_.stream) return;
  http::HttpResponse h;
  h.SetHeader("Content-Type", "text/event-stream");
  h.SetHeader("Cache-Control", "no-cache");
  h.SetHeader("X-Request-Id", id_);
  h.SetHeader("X-Accel-Buffering", "no");
  ex_->StartStream(std::move(h), kSsePingInterval, http::SseComment("keep-alive"));
  for (Choice& c : choices_) {
    if (chat_) {
      json chunk = ChunkBase();
      chunk["choices"] = json::array(
          {{{"index", c.index}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
            {"finish_reason", nullptr}}});
      SendEvent(chunk);
    } else if (req_.echo && !c.text.empty()) {
      json chunk = ChunkBase();
      chunk["choices"] = json::array(
          {{{"index", c.index}, {"text", c.text}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
      SendEvent(chunk);
    }
  }
}

void GenerationJob::OnChunk(int index, GenerationChunk chunk) {
  Choice& c = choices_[static_cast<size_t>(index)];
  if (chunk.finish && !c.backend_final) {
    c.backend_final = true;
    ReleaseSlot(c);
  }
  if (c.done || finished_) return;
  const auto now = Clock::now();
  if (chunk.num_cached_tokens >= 0) c.cached_tokens = chunk.num_cached_tokens;
  if (chunk.queue_seconds && !c.queue_observed) {
    c.queue_observed = true;
    env_.metrics->queue_time.Observe(*chunk.queue_seconds);
  }
  std::string out;
  for (TokenOutput& t : chunk.tokens) {
    ++c.completion_tokens;
    env_.metrics->generation_tokens.Inc();
    if (!c.got_token) {
      c.got_token = true;
      if (!first_token_) {
        first_token_ = now;
        env_.metrics->ttft.Observe(std::chrono::duration<double>(now - ex_->received_at()).count());
      }
    } else {
      env_.metrics->inter_token_latency.Observe(std::chrono::duration<double>(now - c.last_token).count());
    }
    c.last_token = now;
    const size_t start = c.generated_bytes;
    c.generated_bytes += t.text.size();
    auto r = c.stop.Push(t.text);
    if (req_.logprobs) c.pending.push_back({std::move(t), start, c.generated_bytes});
    out += r.released;
    c.released_bytes += r.released.size();
    if (r.stopped) {
      c.done = true;
      c.cut_by_stop = true;
      c.finish_reason = "stop";
      if (!c.backend_final) env_.backend->Cancel(c.backend_id);
      break;
    }
  }
  if (!c.done && chunk.finish) {
    if (*chunk.finish == FinishReason::kError || *chunk.finish == FinishReason::kCancelled) {
      ApiError e = ErrorFromStatus(chunk.error.ok() ? Status(StatusCode::kInternal, "the engine cancelled the request")
                                                    : chunk.error);
      Emit(c, out);
      Fail(e, "error");
      return;
    }
    // A stop token (EOS) the backend did not send as a token still counts.
    if (chunk.num_output_tokens > c.completion_tokens) {
      env_.metrics->generation_tokens.Inc(static_cast<double>(chunk.num_output_tokens - c.completion_tokens));
      c.completion_tokens = chunk.num_output_tokens;
    }
    auto r = c.stop.Push(chunk.text_tail);
    out += r.released;
    c.released_bytes += r.released.size();
    if (r.stopped) {
      c.cut_by_stop = true;
      c.finish_reason = "stop";
    } else {
      const std::string rest = c.stop.Flush();
      out += rest;
      c.released_bytes += rest.size();
      c.finish_reason = ClientFinishReason(*chunk.finish);
    }
    c.done = true;
  }
  Emit(c, out);
  if (c.done) ChoiceDone(c, c.finish_reason);
}

void GenerationJob::Emit(Choice& c, const std::string& text) {
  // A token's logprobs go out with the last byte of its text. When a stop
  // string cut the text, the tokens that begin before the cut are sent and
  // the stop string's own tokens are not; on any other end, all are.
  std::vector<PendingLogprob> ready;
  while (!c.pending.empty()) {
    const PendingLogprob& f = c.pending.front();
    const bool send = f.end <= c.released_bytes || (c.done && !c.cut_by_stop) ||
                      (c.done && c.cut_by_stop && f.start < c.released_bytes);
    if (!send) break;
    ready.push_back(std::move(c.pending.front()));
    c.pending.pop_front();
  }
  if (c.done) c.pending.clear();
  if (text.empty() && ready.empty()) return;
  json lp = ready.empty() ? json(nullptr) : LogprobsFor(c, ready);
  if (!req_.stream) {
    c.text += text;
    if (!ready.empty()) AppendLogprobs(c.logprobs, lp);
    return;
  }
  json chunk = ChunkBase();
  json choice = {{"index", c.index}};
  if (chat_) {
    choice["delta"] = {{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = lp;
  choice["finish_reason"] = nullptr;
  chunk["choices"] = json::array({choice});
  SendEvent(chunk);
}

json GenerationJob::LogprobsFor(const Choice& c, const std::vector<PendingLogprob>& toks) const {
  if (chat_) {
    json content = json::array();
    for (const auto& p : toks) {
      json top = json::array();
      for (const auto& a : p.token.top_logprobs) {
        top.push_back({{"token", a.piece}, {"logprob", a.logprob}, {"bytes", Bytes(a.piece)}});
      }
      content.push_back({{"token", p.token.piece},
                         {"logprob", p.token.logprob},
                         {"bytes", Bytes(p.token.piece)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& p : toks) {
    tokens.push_back(p.token.piece);
    token_logprobs.push_back(p.token.logprob);
    json alts = json::object();
    for (const auto& a : p.token.top_logprobs) {
      if (!alts.contains(a.piece)) alts[a.piece] = a.logprob;
    }
    top.push_back(alts);
    offsets.push_back(c.offset_base + p.start);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

void GenerationJob::AppendLogprobs(json& acc, const json& add) const {
  if (acc.is_null()) {
    acc = add;
    return;
  }
  for (auto it = add.begin(); it != add.end(); ++it) {
    if (it.value().is_array()) {
      for (const auto& v : it.value()) acc[it.key()].push_back(v);
    }
  }
}

void GenerationJob::ChoiceDone(Choice& c, const std::string& finish_reason) {
  env_.metrics->finished.With({finish_reason}).Inc();
  if (req_.stream) {
    json chunk = ChunkBase();
    json choice = {{"index", c.index}};
    if (chat_) {
      choice["delta"] = json::object();
    } else {
      choice["text"] = "";
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason;
    chunk["choices"] = json::array({choice});
    SendEvent(chunk);
  }
  for (const Choice& other : choices_) {
    if (!other.done) return;
  }
  Complete();
}

void GenerationJob::Complete() {
  if (finished_) return;
  if (req_.stream) {
    if (req_.include_usage) {
      json chunk = ChunkBase();
      chunk["choices"] = json::array();
      chunk["usage"] = Usage();
      SendEvent(chunk);
    }
    ex_->Write(std::string(http::kSseDone));
    ex_->EndStream();
    Finish(200);
    return;
  }
  json body = {{"id", id_},
               {"object", chat_ ? "chat.completion" : "text_completion"},
               {"created", created_},
               {"model", env_.model_name}};
  json choices = json::array();
  for (const Choice& c : choices_) {
    json choice = {{"index", c.index}};
    if (chat_) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = req_.logprobs ? (c.logprobs.is_null() ? LogprobsFor(c, {}) : c.logprobs) : json(nullptr);
    choice["finish_reason"] = c.finish_reason;
    choices.push_back(std::move(choice));
  }
  body["choices"] = std::move(choices);
  body["usage"] = Usage();
  http::HttpResponse res;
  res.status = 200;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", id_);
  res.body = Dump(body);
  ex_->Respond(std::move(res));
  Finish(200);
}

void GenerationJob::Fail(const ApiError& error, const std::string& finish_reason) {
  if (finished_) return;
  for (Choice& c : choices_) {
    if (!c.done) {
      c.done = true;
      c.finish_reason = finish_reason;
      env_.metrics->finished.With({finish_reason}).Inc();
    }
  }
  CancelUnfinished();
  if (ex_->streaming()) {
    // Headers (200) are gone: report in-band, then end the stream.
    ex_->Write(http::SseEvent("error", Dump(error.ToJson())));
    ex_->Write(std::string(http::kSseDone));
    ex_->EndStream();
    Finish(200);
    return;
  }
  http::HttpResponse res;
  res.status = error.status;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", id_);
  if (error.retry_after_seconds) res.SetHeader("Retry-After", std::to_string(*error.retry_after_seconds));
  res.body = Dump(error.ToJson());
  ex_->Respond(std::move(res));
  Finish(error.status);
}

void GenerationJob::Abort(const ApiError& error, const std::string& finish_reason) { Fail(error, finish_reason); }

void GenerationJob::OnClientClosed() {
  if (finished_) return;
  for (Choice& c : choices_) {
    if (!c.done) {
      c.done = true;
      c.finish_reason = "cancelled";
      env_.metrics->finished.With({"cancelled"}).Inc();
    }
  }
  CancelUnfinished();
  const int status = ex_->status() ? ex_->status() : 499;
  // Nothing reaches the client any more, but the exchange must still end
  // (that releases the connection and counts for the drain).
  if (ex_->streaming()) {
    ex_->EndStream();
  } else {
    http::HttpResponse res;
    res.status = 499;
    ex_->Respond(std::move(res));
  }
  Finish(status);
}

void GenerationJob::OnTimeout() {
  if (finished_) return;
  ApiError e;
  e.status = 504;
  e.type = "timeout_error";
  e.code = "request_timeout";
  e.message = fmt::format("the request did not finish within {} s (runtime.request_timeout_seconds)",
                          env_.timeout_seconds);
  Fail(e, "timeout");
}

void GenerationJob::CancelUnfinished() {
  for (Choice& c : choices_) {
    if (c.submitted && !c.backend_final) env_.backend->Cancel(c.backend_id);
  }
}

void GenerationJob::ReleaseSlot(Choice& c) {
  // A choice releases its slot once: at its final chunk, or at once if it
  // was never submitted (backend_final doubles as "released").
  if (!c.submitted) {
    if (c.backend_final) return;
    c.backend_final = true;
  }
  env_.sequences_in_flight->fetch_sub(1);
  env_.metrics->sequences_in_flight.Dec();
}

void GenerationJob::Finish(int status) {
  if (finished_) return;
  finished_ = true;
  env_.metrics->e2e_latency.Observe(SecondsSince(ex_->received_at()));
  JobSummary s;
  s.status = status;
  for (const auto& p : prompts_) s.prompt_tokens += static_cast<int64_t>(p.tokens.size());
  std::vector<int64_t> cached(prompts_.size(), 0);
  for (const Choice& c : choices_) {
    s.completion_tokens += c.completion_tokens;
    cached[c.prompt_index] = std::max(cached[c.prompt_index], c.cached_tokens);
  }
  for (int64_t v : cached) s.cached_tokens += v;
  if (first_token_) s.ttft_ms = std::chrono::duration<double, std::milli>(*first_token_ - ex_->received_at()).count();
  s.finish_reason = choices_.empty() ? "" : choices_[0].finish_reason;
  if (done_) {
    auto fn = std::move(done_);
    done_ = nullptr;
    fn(s);
  }
}

json GenerationJob::ChunkBase() const {
  json j = {{"id", id_},
            {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", env_.model_name}};
  if (req_.include_usage) j["usage"] = nullptr;
  return j;
}

json GenerationJob::Usage() const {
  int64_t prompt = 0, completion = 0;
  for (const auto& p : prompts_) prompt += static_cast<int64_t>(p.tokens.size());
  std::vector<int64_t> cached(prompts_.size(), 0);
  for (const Choice& c : choices_) {
    completion += c.completion_tokens;
    cached[c.prompt_index] = std::max(cached[c.prompt_index], c.cached_tokens);
  }
  int64_t cached_total = 0;
  for (int64_t v : cached) cached_total += v;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached_total}}}};
}

void GenerationJob::SendEvent(const json& j) { ex_->Write(http::SseData(Dump(j))); }

}  // namespace kvs::server
