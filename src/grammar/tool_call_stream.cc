// ToolCallStreamParser (tool_call_stream.h): an incremental scanner per format.
// Fed text is appended to `buf`; Process consumes what is decided and
// leaves in `buf` only text that may still be the start of a marker or an
// unfinished piece (a name, a key). State: tool_call_stream_impl.h.
#include "grammar/tool_call_stream.h"

#include <algorithm>
#include <random>

#include "grammar/tool_call_stream_impl.h"

namespace kvs::grammar {

void ToolCallStreamParser::Impl::StepObject() {
  if (phase != ObjPhase::kValue && !SkipSpace()) return;
  switch (phase) {
    case ObjPhase::kOpen:
      if (buf[0] != '{') {  // not a call after all: what we have is content
        EndCall();
        mode = Mode::kContent;
        return;
      }
      Consume(1);
      phase = ObjPhase::kKey;
      return;
    case ObjPhase::kKey: {
      if (buf[0] == '}') {
        Consume(1);
        EndCall();
        mode = Mode::kAfterObject;
        return;
      }
      if (buf[0] != '"') {
        EndCall();
        mode = Mode::kContent;
        return;
      }
      JsonValueScanner key;
      const size_t n = key.Feed(buf);
      if (!key.done()) {
        if (final) {
          EndCall();
          Consume(buf.size());
          mode = Mode::kContent;
        }
        return;
      }
      const Json k = Json::parse(buf.substr(0, n), nullptr, false);
      current_key = k.is_string() ? k.get<std::string>() : "";
      Consume(n);
      if (syn != nullptr && syn->name_keyed && !name_sent) {  // Apertus: {"NAME": ARGS}
        SetName(current_key);
        current_key = "arguments";
      }
      phase = ObjPhase::kColon;
      return;
    }
    case ObjPhase::kColon:
      if (buf[0] != ':') {
        EndCall();
        mode = Mode::kContent;
        return;
      }
      Consume(1);
      phase = ObjPhase::kValue;
      value.Reset();
      return;
    case ObjPhase::kValue: {
      if (!value.started() && !SkipSpace()) return;
      const size_t n = value.Feed(buf);
      const std::string_view text = std::string_view(buf).substr(0, n);
      if (current_key == "name" || current_key == "tool_name") {
        name_value += text;
      } else if (current_key == "arguments" || current_key == "parameters") {
        EmitArgs(text);
      } else if (current_key == "id") {
        call_id += text;
      }
      Consume(n);
      if (final && !value.done()) value.EndOfInput();
      if (!value.done()) return;
      if (current_key == "name" || current_key == "tool_name") {
        const Json v = Json::parse(name_value, nullptr, false);
        if (final && !v.is_string()) return DropUnnamedCall();  // cut inside the name
        std::string id;
        const Json idv = Json::parse(call_id, nullptr, false);
        if (idv.is_string()) id = idv.get<std::string>();
        SetName(v.is_string() ? v.get<std::string>() : "", id);
      }
      phase = ObjPhase::kComma;
      return;
    }
    case ObjPhase::kComma:
      if (buf[0] == ',') {
        Consume(1);
        phase = ObjPhase::kKey;
      } else {
        if (buf[0] == '}') Consume(1);
        EndCall();
        mode = Mode::kAfterObject;
      }
      return;
  }
}

void ToolCallStreamParser::Impl::StepAfterObject() {
  if (syn != nullptr) return StepAfterJsonCall();
  if (!SkipSpace()) {
    if (final) mode = Mode::kContent;
    return;
  }
  if (format == ToolCallFormat::kHermes || format == ToolCallFormat::kFunctionary ||
      format == ToolCallFormat::kQwen3Coder) {
    const std::string& close = format == ToolCallFormat::kFunctionary ? kFuncClose : kHermesClose;
    if (!DropCutMarker(close) && Expect(close) < 0) return;
    mode = Mode::kContent;
  } else if (in_mistral_list) {
    if (buf[0] == ',') {
      Consume(1);
      call_id.clear();
      StartJsonObjectCall();
    } else {
      if (buf[0] == ']') Consume(1);
      in_mistral_list = false;
      mode = Mode::kContent;
    }
  } else if (format == ToolCallFormat::kLlama3 && (buf[0] == ';' || buf[0] == '{')) {
    if (buf[0] == ';') Consume(1);
    StartJsonObjectCall();
  } else {
    mode = Mode::kContent;
  }
}

void ToolCallStreamParser::Impl::StepRawName() {
  if (format == ToolCallFormat::kQwen3Coder) {
    if (raw_name.empty() && !name_sent) {
      if (!SkipSpace()) return;
      const int e = Expect(kFuncOpen);
      if (e < 0) return;
      if (e == 0) {  // not the expected XML: give the text back as content
        EndCall();
        mode = Mode::kContent;
        return;
      }
      raw_name = " ";  // marks "inside <function=" (trimmed below)
    }
    if (!NameUntil('>')) return;
    SetName(raw_name.substr(1));
    qwen_params = 0;
    mode = Mode::kQwenParams;
    return;
  }
  std::vector<std::string> ends;
  if (format == ToolCallFormat::kMistral) ends = {kMistralArgs, kMistralId};
  if (format == ToolCallFormat::kDeepSeekV3 || format == ToolCallFormat::kDeepSeekV31) ends = {kDsSep};
  if (format == ToolCallFormat::kFunctionary) ends = {">"};
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& m : ends) {
    const size_t p = buf.find(m);
    if (p < best) {
      best = p;
      which = &m;
    }
  }
  if (which == nullptr) {
    const size_t safe = final ? buf.size() : SafePrefixLength(buf, ends);
    (reading_id ? call_id : raw_name) += buf.substr(0, safe);
    Consume(safe);
    if (final) {
      EndCall();
      mode = Mode::kContent;
    }
    return;
  }
  (reading_id ? call_id : raw_name) += buf.substr(0, best);
  Consume(best + which->size());
  auto trim = [](std::string s) {
    const size_t a = s.find_first_not_of(" \n\t\r"), b = s.find_last_not_of(" \n\t\r");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  if (*which == kMistralId) {
    reading_id = true;
    return;
  }
  if (*which == kDsSep) {
    ds_stage = 0;
    mode = Mode::kDsAfterSep;
    return;
  }
  SetName(trim(raw_name), trim(call_id));
  reading_id = false;
  call_id.clear();
  value.Reset();
  mode = Mode::kArgsValue;
}

void ToolCallStreamParser::Impl::StepArgsValue() {
  if (!value.started() && !SkipSpace()) {
    if (final) {
      EndCall();
      mode = Mode::kContent;
    }
    return;
  }
  const size_t n = value.Feed(buf);
  EmitArgs(std::string_view(buf).substr(0, n));
  Consume(n);
  if (final && !value.done()) value.EndOfInput();
  if (!value.done()) return;
  EndCall();
  // Functionary closes with </function>; Mistral needs nothing more.
  mode = format == ToolCallFormat::kFunctionary ? Mode::kAfterObject : Mode::kContent;
}

void ToolCallStreamParser::Impl::StepArgsUntil() {
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& m : until) {
    const size_t p = buf.find(m);
    if (p < best) {
      best = p;
      which = &m;
    }
  }
  const bool call = in_call;
  auto emit = [&](std::string_view t) {
    if (format == ToolCallFormat::kHarmony && !call) {
      if (harmony_channel == "analysis") {
        EmitReasoning(t);
      } else {
        EmitContent(t);
      }
    } else {
      EmitArgs(t);
    }
  };
  if (which == nullptr) {
    // A cut-off end marker at the end of the output is markup, not text.
    const size_t safe = SafePrefixLength(buf, until);
    emit(std::string_view(buf).substr(0, safe));
    Consume(final ? buf.size() : safe);
    if (final) {
      EndCall();
      mode = Mode::kContent;
    }
    return;
  }
  emit(std::string_view(buf).substr(0, best));
  // Harmony: <|start|> and <|channel|> begin the next message; leave them.
  const bool keep = *which == kHStart || *which == kHChannel;
  Consume(best + (keep ? 0 : which->size()));
  EndCall();
  mode = after_until;
}

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format, ToolCallParseOptions options)
    : impl_(std::make_unique<Impl>(format, std::move(options))) {}
ToolCallStreamParser::~ToolCallStreamParser() = default;
ToolCallStreamParser::ToolCallStreamParser(ToolCallStreamParser&&) noexcept = default;
ToolCallStreamParser& ToolCallStreamParser::operator=(ToolCallStreamParser&&) noexcept = default;

StreamDelta ToolCallStreamParser::Feed(std::string_view text) {
  Impl& m = *impl_;
  m.out = {};
  if (m.final) return {};
  m.buf += text;
  if (m.format == ToolCallFormat::kNone) {
    m.EmitContent(m.buf);
    m.buf.clear();
  } else {
    m.Process();
  }
  return std::move(m.out);
}

StreamDelta ToolCallStreamParser::Finish() {
  Impl& m = *impl_;
  m.out = {};
  if (m.final) return {};
  m.final = true;
  if (m.in_call) m.cut_call = m.result.tool_calls.size() - 1;
  if (m.format == ToolCallFormat::kNone) {
    m.EmitContent(m.buf);
    m.buf.clear();
  } else {
    m.Process();
  }
  m.EndCall();
  if (!m.buf.empty()) m.EmitContent(m.buf);
  m.buf.clear();
  // Trailing whitespace is content only in a reply without tool calls.
  if (m.result.tool_calls.empty() && !m.held_ws.empty()) {
    m.out.content += m.held_ws;
    m.result.content += m.held_ws;
  }
  m.held_ws.clear();
  return std::move(m.out);
}

const ParsedOutput& ToolCallStreamParser::result() const { return impl_->result; }

std::string MakeToolCallId(ToolCallFormat format) {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const bool mistral = format == ToolCallFormat::kMistral;  // its templates require 9 alphanumerics
  if (format == ToolCallFormat::kSolarOpen) {  // Solar Open's prompt asks for 10 of [a-z0-9]
    std::string id;
    for (int i = 0; i < 10; ++i) id += kAlnum[rng() % 26 == 0 ? 52 + rng() % 10 : rng() % 26];
    return id;
  }
  std::string id = mistral ? "" : "call_";
  for (int i = 0, n = mistral ? 9 : 24; i < n; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

ParsedOutput ParseToolCalls(ToolCallFormat format, std::string_view text, const ToolCallParseOptions& options) {
  ToolCallStreamParser parser(format, options);
  (void)parser.Feed(text);
  (void)parser.Finish();
  ParsedOutput out = parser.result();
  // A malformed call makes the whole reply text (vLLM's rule); a call the
  // output ended in is kept as the stream sent it (tool_calls.h).
  bool malformed = parser.impl_->undecodable;
  for (size_t i = 0; i < out.tool_calls.size(); ++i) {
    if (i == parser.impl_->cut_call) continue;
    const auto args = nlohmann::json::parse(out.tool_calls[i].arguments, nullptr, false);
    malformed = malformed || out.tool_calls[i].name.empty() || !args.is_object();
  }
  if (malformed) {
    ParsedOutput plain;
    plain.content = std::string(text);
    return plain;
  }
  return out;
}

}  // namespace kvs::grammar
