#include "server/generation.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/sse.h"
#include "http/sse_stream.h"

namespace kvs::server {

using nlohmann::json;

namespace {

std::string ClientFinishReason(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kLength: return "length";
    default: return "error";
  }
}

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

GenerationJob::GenerationJob(JobEnv env, std::shared_ptr<http::Exchange> ex, api::ParsedRequest req,
                             std::vector<PreparedPrompt> prompts, std::string id, DoneFn done)
    : env_(std::move(env)),
      ex_(std::move(ex)),
      req_(std::move(req)),
      prompts_(std::move(prompts)),
      id_(std::move(id)),
      done_(std::move(done)) {
  const api::DialectEntry& dialect = api::FindDialect(req_.endpoint, req_.dialect);
  const bool chat = req_.endpoint == api::Endpoint::kChatCompletions;
  // One copy of the stop strings for every choice.
  const auto stops = std::make_shared<const std::vector<std::string>>(std::move(req_.stop));
  const grammar::ReasoningFormat reasoning = env_.backend->ReasoningFormat();
  grammar::ToolCallFormat format = env_.backend->ToolCallFormat();
  // Harmony content carries message headers that only its parser removes.
  if (format == grammar::ToolCallFormat::kNone && reasoning.harmony) format = grammar::ToolCallFormat::kHarmony;
  api::ShapeOptions shape;
  shape.id = id_;
  shape.created = UnixNow();
  shape.model = env_.model_name;
  shape.stream = req_.stream;
  shape.include_usage = req_.include_usage;
  shape.logprobs = req_.sampling.logprobs.has_value();
  shape.reasoning = chat && reasoning.enabled();
  shape.request_echo = req_.dialect_echo;
  for (size_t p = 0; p < prompts_.size(); ++p) {
    for (int i = 0; i < req_.n; ++i) {
      Choice c;
      c.index = static_cast<int>(p) * req_.n + i;
      c.prompt_index = static_cast<int>(p);
      c.backend_id = fmt::format("{}-{}", id_, c.index);
      c.text = api::ChoiceText(stops, req_.sampling.logprobs.has_value());
      if (chat && format != grammar::ToolCallFormat::kNone &&
          (!req_.tools.empty() || format == grammar::ToolCallFormat::kHarmony)) {
        grammar::ToolCallParseOptions o;
        o.tools = req_.tools;
        if (dialect.tool_call_id) o.make_id = dialect.tool_call_id;
        c.tool_parser = std::make_unique<grammar::ToolCallStreamParser>(format, std::move(o));
      }
      if (chat && reasoning.enabled()) {
        c.reasoning = std::make_unique<grammar::ReasoningStreamParser>(reasoning, prompts_[p].reasoning_start);
      }
      shape.choice_echo.push_back(req_.echo ? prompts_[p].echo_text : std::string());
      choices_.push_back(std::move(c));
    }
  }
  shape_ = dialect.make_shape(std::move(shape));
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
  const Executor on_strand = [ex = ex_](std::function<void()> fn) { ex->Post(std::move(fn)); };
  for (Choice& c : choices_) {
    const PreparedPrompt& p = prompts_[static_cast<size_t>(c.prompt_index)];
    engine::ValidatedRequest g = *p.request;
    g.set_request_id(c.backend_id);
    if (req_.sampling.seed) g.set_seed(*req_.sampling.seed + static_cast<uint64_t>(c.index % req_.n));  // distinct choices
    const int index = c.index;
    Status st = env_.backend->Submit(std::move(g), on_strand,
                                     [self, index](GenerationChunk chunk) { self->OnChunk(index, std::move(chunk)); });
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
      Fail(api::ErrorFromStatus(st), "error");
      return;
    }
    c.submitted = true;
  }
  double prompt_tokens = 0;
  for (const auto& p : prompts_) prompt_tokens += static_cast<double>(p.tokens().size());
  env_.metrics->prompt_tokens.Inc(prompt_tokens);
  for (const auto& p : prompts_) env_.metrics->ObservePrompt(static_cast<int64_t>(p.tokens().size()));
  if (!req_.stream) return;
  http::StartSseStream(*ex_, id_);
  api::Usage u;
  u.prompt_tokens = Usage().prompt_tokens;
  Send(shape_->Start(u));
}

void GenerationJob::OnChunk(int index, GenerationChunk chunk) {
  Choice& c = choices_[static_cast<size_t>(index)];
  if (chunk.finished() && !c.backend_final) {
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
  std::string reasoning;
  for (api::TokenOutput& t : chunk.tokens) {
    ++c.completion_tokens;
    env_.metrics->generation_tokens.Inc();
    ++c.timed_tokens;
    if (!c.got_token) {
      c.got_token = true;
      c.first_token = now;
      if (!first_token_) {
        first_token_ = now;
        env_.metrics->ObserveFirstToken(static_cast<int64_t>(prompts_[static_cast<size_t>(c.prompt_index)].tokens().size()),
                                        std::chrono::duration<double>(now - ex_->received_at()).count());
      }
    } else {
      env_.metrics->inter_token_latency.Observe(std::chrono::duration<double>(now - c.last_token).count());
    }
    c.last_token = now;
    // The tool-call parser needs the format's markers that the content
    // decoder dropped as special tokens ([TOOL_CALLS], <｜tool▁calls▁begin｜>),
    // the reasoning parser its delimiters (<|channel|>...).
    if (c.tool_parser && !t.marker_text.empty()) {
      t.text += t.marker_text;
    } else if (c.reasoning) {
      t.text += t.reasoning_marker;
    }
    if (c.reasoning) {
      // Only the content after the reasoning meets stop strings and tools.
      const bool was_inside = c.reasoning->in_reasoning();
      grammar::ReasoningDelta d = c.reasoning->Feed(t.text);
      if (was_inside || c.reasoning->in_reasoning()) ++c.reasoning_tokens;
      reasoning += d.reasoning;
      t.text = std::move(d.content);
    }
    if (c.text.AddToken(std::move(t), &out)) {
      c.done = true;
      c.finish_reason = "stop";
      if (!c.backend_final) env_.backend->Cancel(c.backend_id);
      break;
    }
  }
  if (!c.done && chunk.finished()) {
    if (chunk.finish == engine::FinishReason::kError || chunk.finish == engine::FinishReason::kCancelled) {
      api::ApiError e = api::ErrorFromStatus(
          chunk.error.ok() ? Status(StatusCode::kInternal, "the engine cancelled the request") : chunk.error);
      EmitReasoning(c, reasoning);
      Emit(c, out);
      Fail(e, "error");
      return;
    }
    // A stop token (EOS) the backend did not send as a token still counts.
    if (chunk.num_output_tokens > c.completion_tokens) {
      env_.metrics->generation_tokens.Inc(static_cast<double>(chunk.num_output_tokens - c.completion_tokens));
      c.completion_tokens = chunk.num_output_tokens;
    }
    std::string tail = std::move(chunk.text_tail);
    if (c.reasoning) {
      // A section that never closed is all reasoning.
      grammar::ReasoningDelta d = c.reasoning->Feed(tail);
      const grammar::ReasoningDelta rest = c.reasoning->Finish();
      reasoning += d.reasoning + rest.reasoning;
      tail = d.content + rest.content;
    }
    const bool cut = c.text.End(tail, &out);
    c.finish_reason = cut ? "stop" : ClientFinishReason(chunk.finish);
    c.done = true;
  }
  EmitReasoning(c, reasoning);
  Emit(c, out);
  if (c.done) ChoiceDone(c, c.finish_reason);
}

void GenerationJob::Emit(Choice& c, const std::string& text) {
  std::vector<api::LogprobToken> ready = c.text.TakeReadyLogprobs();
  if (text.empty() && ready.empty()) return;
  if (c.tool_parser) {
    const grammar::StreamDelta d = c.tool_parser->Feed(text);
    EmitReasoning(c, d.reasoning);  // harmony analysis after the leading section
    if (!req_.stream) {
      for (api::LogprobToken& t : ready) c.logprobs.push_back(std::move(t));
      return;  // the answer is the parser's result (Complete)
    }
    SendToolDelta(c, d, std::move(ready));
    return;
  }
  if (!req_.stream) {
    c.answer += text;
    for (api::LogprobToken& t : ready) c.logprobs.push_back(std::move(t));
    return;
  }
  Send(shape_->Text(c.index, text, std::move(ready)));
}

void GenerationJob::EmitReasoning(Choice& c, const std::string& text) {
  if (text.empty()) return;
  if (!req_.stream) {
    c.reasoning_text += text;
    return;
  }
  Send(shape_->Reasoning(c.index, text));
}

void GenerationJob::SendToolDelta(Choice& c, const grammar::StreamDelta& d, std::vector<api::LogprobToken> logprobs) {
  std::vector<api::SseOut> ev = shape_->Text(c.index, d.content, std::move(logprobs));
  for (api::SseOut& e : shape_->ToolCalls(c.index, d.tool_calls)) ev.push_back(std::move(e));
  Send(ev);
}

void GenerationJob::ChoiceDone(Choice& c, std::string finish_reason) {
  if (c.tool_parser) {
    const grammar::StreamDelta rest = c.tool_parser->Finish();
    EmitReasoning(c, rest.reasoning);
    if (req_.stream) SendToolDelta(c, rest, {});
    // OpenAI: a reply that ends in tool calls finishes with "tool_calls".
    if (finish_reason == "stop" && !c.tool_parser->result().tool_calls.empty()) finish_reason = "tool_calls";
    c.finish_reason = finish_reason;
  }
  env_.metrics->finished.With({finish_reason}).Inc();
  if (c.got_token) {
    env_.metrics->ObserveDecode(c.timed_tokens, std::chrono::duration<double>(c.last_token - c.first_token).count());
  }
  if (req_.stream) Send(shape_->FinishChoice(c.index, {finish_reason, c.text.matched_stop()}));
  for (const Choice& other : choices_) {
    if (!other.done) return;
  }
  Complete();
}

void GenerationJob::Complete() {
  if (finished_) return;
  if (!req_.stream) {
    // The whole answer goes through the same shape a stream would: per
    // choice its reasoning, its content (with the logprobs it covers), its
    // tool calls, its end.
    for (Choice& c : choices_) {
      shape_->Reasoning(c.index, c.reasoning_text);
      if (c.tool_parser) {
        const grammar::ParsedOutput& parsed = c.tool_parser->result();
        shape_->Text(c.index, parsed.content, std::move(c.logprobs));
        std::vector<grammar::ToolCallDelta> calls;
        for (size_t i = 0; i < parsed.tool_calls.size(); ++i) {
          const grammar::ToolCall& t = parsed.tool_calls[i];
          calls.push_back({static_cast<int32_t>(i), t.id, t.name, t.arguments});
        }
        shape_->ToolCalls(c.index, calls);
      } else {
        shape_->Text(c.index, c.answer, std::move(c.logprobs));
      }
      shape_->FinishChoice(c.index, {c.finish_reason, c.text.matched_stop()});
    }
  }
  const std::vector<api::SseOut> last = shape_->End(Usage());
  if (req_.stream) {
    Send(last);
    ex_->EndStream();
    Finish(200);
    return;
  }
  http::HttpResponse res;
  res.status = 200;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", id_);
  res.body = api::Dump(shape_->Body());
  ex_->Respond(std::move(res));
  Finish(200);
}

void GenerationJob::Fail(const api::ApiError& error, const std::string& finish_reason) {
  if (finished_) return;
  for (Choice& c : choices_) {
    if (!c.done) {
      c.done = true;
      c.text.Abandon();
      c.finish_reason = finish_reason;
      env_.metrics->finished.With({finish_reason}).Inc();
    }
  }
  CancelUnfinished();
  if (ex_->streaming()) {
    // Headers (200) are gone: report in-band, then end the stream.
    Send(shape_->FailStream(error));
    ex_->EndStream();
    Finish(200);
    return;
  }
  http::HttpResponse res;
  res.status = error.status;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", id_);
  if (error.retry_after_seconds) res.SetHeader("Retry-After", std::to_string(*error.retry_after_seconds));
  res.body = api::Dump(shape_->ErrorBody(error));
  ex_->Respond(std::move(res));
  Finish(error.status);
}

void GenerationJob::Abort(const api::ApiError& error, const std::string& finish_reason) { Fail(error, finish_reason); }

void GenerationJob::OnClientClosed() {
  if (finished_) return;
  for (Choice& c : choices_) {
    if (!c.done) {
      c.done = true;
      c.text.Abandon();
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
  api::ApiError e = api::MakeError(
      504,
      fmt::format("the request did not finish within {} s (runtime.request_timeout_seconds)", env_.timeout_seconds),
      "timeout_error", "request_timeout");
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
  const api::Usage u = Usage();
  JobSummary s;
  s.status = status;
  s.prompt_tokens = u.prompt_tokens;
  s.completion_tokens = u.completion_tokens;
  s.cached_tokens = u.cached_tokens;
  if (first_token_) s.ttft_ms = std::chrono::duration<double, std::milli>(*first_token_ - ex_->received_at()).count();
  s.finish_reason = choices_.empty() ? "" : choices_[0].finish_reason;
  if (done_) {
    auto fn = std::move(done_);
    done_ = nullptr;
    fn(s);
  }
}

api::Usage GenerationJob::Usage() const {
  api::Usage u;
  for (const auto& p : prompts_) u.prompt_tokens += static_cast<int64_t>(p.tokens().size());
  std::vector<int64_t> cached(prompts_.size(), 0);
  for (const Choice& c : choices_) {
    u.completion_tokens += c.completion_tokens;
    if (c.reasoning) u.reasoning_tokens = u.reasoning_tokens.value_or(0) + c.reasoning_tokens;
    cached[static_cast<size_t>(c.prompt_index)] = std::max(cached[static_cast<size_t>(c.prompt_index)], c.cached_tokens);
  }
  for (int64_t v : cached) u.cached_tokens += v;
  return u;
}

void GenerationJob::Send(const std::vector<api::SseOut>& events) {
  std::string out;
  for (const api::SseOut& e : events) {
    if (e.done) {
      out += http::kSseDone;
    } else {
      out += e.event.empty() ? http::SseData(api::Dump(e.data)) : http::SseEvent(e.event, api::Dump(e.data));
    }
  }
  if (!out.empty()) ex_->Write(std::move(out));
}

}  // namespace kvs::server
