// ToolCallStreamParser steps for Qwen3-Coder parameters, python-tag code,
// DeepSeek call blocks and gpt-oss harmony messages.
#include <algorithm>

#include "grammar/tool_call_stream_impl.h"

namespace kvs::grammar {

void ToolCallStreamParser::Impl::StepQwenParams() {
  if (!SkipSpace()) {
    if (final) {
      EmitArgs(qwen_params == 0 ? "{}" : "}");
      EndCall();
      mode = Mode::kContent;
    }
    return;
  }
  if (Expect(kFuncClose) == 1) {
    EmitArgs(qwen_params == 0 ? "{}" : "}");
    EndCall();
    mode = Mode::kAfterObject;  // then </tool_call>
    return;
  }
  const int e = Expect(kParamOpen);
  if (e < 0) return;
  if (e == 0) {
    const bool partial_close = !final && kFuncClose.compare(0, std::min(buf.size(), kFuncClose.size()),
                                                            buf.substr(0, kFuncClose.size())) == 0;
    if (partial_close) return;
    // A tag cut off by the end of the output is markup; anything else is
    // malformed: close what we have.
    if (!DropCutMarker(kFuncClose)) DropCutMarker(kParamOpen);
    EmitArgs(qwen_params == 0 ? "{}" : "}");
    EndCall();
    mode = Mode::kContent;
    return;
  }
  // A whole <parameter=NAME>VALUE</parameter> is needed before emitting.
  const size_t gt = buf.find('>');
  const size_t close = buf.find(kParamClose);
  if (gt == std::string::npos || close == std::string::npos || close < gt) {
    buf.insert(0, kParamOpen);
    if (final) {  // the output ended inside the parameter: it is left out
      Consume(buf.size());
      EmitArgs(qwen_params == 0 ? "{}" : "}");
      EndCall();
      mode = Mode::kContent;
    }
    return;
  }
  const std::string pname = buf.substr(0, gt);
  const std::string raw = buf.substr(gt + 1, close - gt - 1);
  Consume(close + kParamClose.size());
  EmitArgs(std::string(qwen_params++ == 0 ? "{" : ", ") + Json(pname).dump() + ": " + QwenValue(pname, raw));
}

std::string ToolCallStreamParser::Impl::QwenValue(const std::string& param, std::string raw) const {
  if (!raw.empty() && raw.front() == '\n') raw.erase(0, 1);
  if (!raw.empty() && raw.back() == '\n') raw.pop_back();
  // The parameter's declared type decides whether the text is a string.
  std::string type;
  if (opts.tools.is_array()) {
    const std::string& fname = result.tool_calls.back().name;
    for (const Json& t : opts.tools) {
      const Json& f = t.contains("function") ? t["function"] : t;
      if (!f.is_object() || f.value("name", "") != fname) continue;
      const Json props = f.contains("parameters") && f["parameters"].is_object()
                             ? f["parameters"].value("properties", Json::object())
                             : Json::object();
      if (props.contains(param) && props[param].is_object() && props[param].contains("type") &&
          props[param]["type"].is_string()) {
        type = props[param]["type"].get<std::string>();
      }
    }
  }
  if (type == "string") return Json(raw).dump();
  if (raw == "True" || raw == "False" || raw == "None") return raw == "None" ? "null" : raw == "True" ? "true" : "false";
  const Json v = Json::parse(raw, nullptr, false);
  if (!v.is_discarded()) return v.dump();
  return Json(raw).dump();
}

void ToolCallStreamParser::Impl::StepPythonCode() {
  if (!final) return;  // the code runs to the end of the output
  std::string code = buf;
  Consume(buf.size());
  for (const char* end : {"<|eom_id|>", "<|eot_id|>"}) {
    if (const size_t p = code.find(end); p != std::string::npos) code.resize(p);
  }
  const size_t a = code.find_first_not_of(" \n\t\r"), b = code.find_last_not_of(" \n\t\r");
  code = a == std::string::npos ? "" : code.substr(a, b - a + 1);
  // Llama 3 built-in tools: name.call(key="value", n=1).
  const size_t dot = code.find(".call(");
  if (format == ToolCallFormat::kLlama3 && dot != std::string::npos && code.back() == ')' &&
      code.find_first_not_of("abcdefghijklmnopqrstuvwxyz_0123456789") == dot) {
    Json args = Json::object();
    std::string rest = code.substr(dot + 6, code.size() - dot - 7);
    bool ok = true;
    while (ok && !rest.empty()) {
      const size_t eq = rest.find('=');
      if (eq == std::string::npos) {
        ok = false;
        break;
      }
      std::string key = rest.substr(0, eq);
      key.erase(0, key.find_first_not_of(" ,"));
      key.erase(key.find_last_not_of(' ') + 1);
      rest = rest.substr(eq + 1);
      rest.erase(0, rest.find_first_not_of(' '));
      JsonValueScanner v;
      const size_t n = v.Feed(rest);
      v.EndOfInput();
      Json val = Json::parse(rest.substr(0, n), nullptr, false);
      if (val.is_discarded()) {
        ok = false;
        break;
      }
      args[key] = val;
      rest = rest.substr(n);
      rest.erase(0, rest.find_first_not_of(" ,"));
      if (rest.find_first_not_of(' ') == std::string::npos) rest.clear();
    }
    if (ok) {
      SetName(code.substr(0, dot));
      EmitArgs(args.dump());
      EndCall();
      mode = Mode::kContent;
      return;
    }
  }
  SetName("python");
  const Json as_json = Json::parse(code, nullptr, false);
  EmitArgs(as_json.is_object() ? code : Json{{"code", code}}.dump());
  EndCall();
  mode = Mode::kContent;
}

void ToolCallStreamParser::Impl::StepDsBetween() {
  if (!SkipSpace() || DropCutMarker(kDsCallsEnd)) {
    if (final) mode = Mode::kContent;
    return;
  }
  const int begin = Expect(kDsCallBegin);
  if (begin < 0) return;
  if (begin == 1) {
    StartCall();
    raw_name.clear();
    mode = Mode::kRawName;
    return;
  }
  const int end = Expect(kDsCallsEnd);
  if (end < 0) return;
  mode = Mode::kContent;
}

void ToolCallStreamParser::Impl::StepDsAfterSep() {
  switch (ds_stage) {
    case 0: {  // V3.1 puts the arguments right after the separator; V3 a name line
      if (buf.empty()) {
        if (final) EndCall();
        if (final) mode = Mode::kContent;
        return;
      }
      if (buf[0] == '{' || buf[0] == '[') {
        SetName(raw_name);
        until = {kDsCallEnd};
        after_until = Mode::kDsBetween;
        mode = Mode::kArgsUntil;
        return;
      }
      raw_name.clear();  // it was the call type ("function")
      ds_stage = 1;
      return;
    }
    case 1: {  // NAME\n
      if (!NameUntil('\n')) return;
      SetName(raw_name);
      ds_stage = 2;
      return;
    }
    case 2: {  // ```json\n
      const int e = Expect("```json\n");
      if (e < 0) return;
      until = {"\n```", kDsCallEnd};
      after_until = Mode::kDsAfterSep;
      ds_stage = 4;
      mode = Mode::kArgsUntil;
      return;
    }
    default: {  // after the arguments: skip to the end of the call
      const size_t p = buf.find(kDsCallEnd);
      if (p == std::string::npos) {
        if (final) Consume(buf.size());
        if (final) mode = Mode::kContent;
        return;
      }
      Consume(p + kDsCallEnd.size());
      mode = Mode::kDsBetween;
      return;
    }
  }
}

void ToolCallStreamParser::Impl::StepHarmonyHeader() {
  const size_t p = buf.find(kHMessage);
  if (p == std::string::npos) {
    if (final) {
      Consume(buf.size());
      mode = Mode::kContent;
    }
    return;
  }
  std::string header = buf.substr(0, p);
  Consume(p + kHMessage.size());
  if (const size_t c = header.find(kHChannel); c != std::string::npos) header = header.substr(c + kHChannel.size());
  const size_t first = header.find_first_not_of(' ');
  const size_t word_end = header.find_first_of(" <", first);
  harmony_channel = first == std::string::npos ? "" : header.substr(first, word_end - first);
  harmony_call = false;
  if (const size_t to = header.find("to=functions."); to != std::string::npos) {
    const size_t s = to + 13;
    const size_t e = header.find_first_of(" <", s);
    StartCall();
    SetName(header.substr(s, e == std::string::npos ? std::string::npos : e - s));
    harmony_call = true;
  }
  until = kHEnds;
  after_until = Mode::kContent;
  mode = Mode::kHarmonyBody;
}

}  // namespace kvs::grammar
