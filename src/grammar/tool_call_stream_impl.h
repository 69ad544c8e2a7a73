// ToolCallStreamParser's state (tool_call_stream.h), shared by its two source
// files: tool_call_stream.cc (content, JSON-object calls, names, argument
// values), tool_call_stream_formats.cc (Qwen3-Coder parameters, python
// code, DeepSeek, harmony) and tool_call_stream_tagged.cc (the formats
// described by tool_call_syntax.h). Internal to the grammar module.
// Thread-safety: one instance per stream.
#pragma once

#include <string>
#include <vector>

#include "grammar/tool_call_scan.h"
#include "grammar/tool_call_syntax.h"
#include "grammar/tool_call_stream.h"

namespace kvs::grammar {

using internal::JsonValueScanner;
using internal::SafePrefixLength;

namespace tool_call_internal {

using Json = nlohmann::ordered_json;

inline const std::string kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
inline const std::string kPythonTag = "<|python_tag|>";
inline const std::string kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]", kMistralId = "[CALL_ID]";
inline const std::string kDsCallsBegin = "<｜tool▁calls▁begin｜>", kDsCallsEnd = "<｜tool▁calls▁end｜>";
inline const std::string kDsCallBegin = "<｜tool▁call▁begin｜>", kDsCallEnd = "<｜tool▁call▁end｜>";
inline const std::string kDsSep = "<｜tool▁sep｜>";
inline const std::string kFuncOpen = "<function=", kFuncClose = "</function>";
inline const std::string kParamOpen = "<parameter=", kParamClose = "</parameter>";
inline const std::string kHChannel = "<|channel|>", kHMessage = "<|message|>", kHStart = "<|start|>";
inline const std::vector<std::string> kHEnds = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>"};

inline bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace tool_call_internal

using namespace tool_call_internal;  // NOLINT: internal header

struct ToolCallStreamParser::Impl {
  enum class Mode {
    kContent,
    kJsonObject,      // a {"name": .., "arguments": ..} object (Hermes body, Llama 3, Mistral list item)
    kAfterObject,     // between such an object and what follows it
    kRawName,         // a name up to a marker (Mistral, DeepSeek, Functionary, Qwen3-Coder)
    kArgsValue,       // a JSON value of arguments
    kArgsUntil,       // argument text up to a marker (DeepSeek V3.1, Harmony)
    kQwenParams,      // <parameter=..> blocks
    kPythonCode,      // <|python_tag|> code up to the end
    kDsBetween,       // inside <｜tool▁calls▁begin｜> between calls
    kDsAfterSep,      // DeepSeek: after <｜tool▁sep｜>
    kHarmonyHeader,   // after <|channel|>, up to <|message|>
    kHarmonyBody,     // a message body up to an end marker
    // TaggedSyntax formats (tool_call_stream_tagged.cc):
    kSection,         // inside section_open, before/between calls
    kTaggedCall,      // after call_open: the name, then the arguments up to call_close
    kPythonicSection, // LFM2: the whole section up to section_close
    kReasoning,       // reasoning up to one of reasoning_ends
    kAtemHeader,      // Muse Glimmer: a message header up to <|message|>
  };

  ToolCallFormat format;
  ToolCallParseOptions opts;
  std::string buf;
  bool final = false;
  ParsedOutput result;
  StreamDelta out;
  std::string held_ws;       // trailing whitespace of the content, not sent yet
  bool content_started = false;
  Mode mode = Mode::kContent;

  // The current call.
  bool in_call = false;
  bool name_sent = false;
  std::string pending_args;  // argument text before the name was known
  JsonValueScanner value;
  // kJsonObject state.
  enum class ObjPhase { kOpen, kKey, kColon, kValue, kComma } phase = ObjPhase::kOpen;
  std::string key_text;      // raw JSON of the current key
  std::string current_key;
  std::string name_value;    // raw JSON of the "name" value
  bool in_mistral_list = false;
  // Other per-format state.
  std::string raw_name;
  std::string call_id;
  bool reading_id = false;          // Mistral: after [CALL_ID]
  int ds_stage = 0;                 // DeepSeek: 0 decide, 1 name line, 2 fence, 3 args, 4 to call end
  std::vector<std::string> until;   // kArgsUntil end markers
  Mode after_until = Mode::kContent;
  int qwen_params = 0;
  std::string harmony_channel;
  bool harmony_call = false;
  // TaggedSyntax formats.
  const internal::TaggedSyntax* syn = nullptr;
  std::vector<std::string> tagged_markers;  // what content is scanned for
  bool in_section = false;
  bool in_json_list = false;
  std::vector<std::string> reasoning_ends;
  size_t searched = 0;              // buf holds no call/section close before this (FindFrom)
  std::string before_call_ws;       // held_ws and content_started before the current call
  bool before_call_started = false;
  // A reply that ends inside a call (tool_calls.h): the text of the call
  // (from the marker that opened it, or its section's) while its name is
  // not announced, given back as content if the output ends there.
  std::string unnamed;
  bool tracking = false;
  // The call the output ended in (Finish found it open): its arguments are
  // what was complete, so ParseToolCalls keeps it whatever they are.
  size_t cut_call = std::string::npos;
  // A finished tagged call whose arguments did not decode to the end (its
  // arguments are the parameters before the fault): ParseToolCalls falls
  // back to text, as for malformed JSON.
  bool undecodable = false;

  Impl(ToolCallFormat f, ToolCallParseOptions o)
      : format(f == ToolCallFormat::kDeepSeekV31 ? ToolCallFormat::kDeepSeekV3 : f), opts(std::move(o)) {
    if (!opts.make_id) opts.make_id = [f] { return MakeToolCallId(f); };
    InitTagged();
  }
  void InitTagged();

  // --- output helpers ---------------------------------------------------------
  void EmitContent(std::string_view text) {
    if (text.empty()) return;
    size_t end = text.size();
    while (end > 0 && IsSpace(text[end - 1])) --end;
    if (end == 0) {
      held_ws += text;
      return;
    }
    const std::string piece = held_ws + std::string(text.substr(0, end));
    held_ws = std::string(text.substr(end));
    // Leading whitespace right after tool calls is dropped too.
    if (!result.tool_calls.empty() && !content_started) {
      const size_t first = piece.find_first_not_of(" \n\t\r");
      out.content += piece.substr(first);
      result.content += piece.substr(first);
    } else {
      out.content += piece;
      result.content += piece;
    }
    content_started = true;
  }
  void EmitReasoning(std::string_view text) {
    out.reasoning += text;
    result.reasoning += text;
  }
  ToolCallDelta& Delta() {
    const auto index = static_cast<int32_t>(result.tool_calls.size()) - 1;
    if (out.tool_calls.empty() || out.tool_calls.back().index != index) out.tool_calls.push_back({index, {}, {}, {}});
    return out.tool_calls.back();
  }
  void StartCall() {
    before_call_ws = held_ws;
    before_call_started = content_started;
    if (!tracking) {  // a call after others in a section: its text starts here
      tracking = true;
      unnamed.clear();
    }
    held_ws.clear();  // whitespace before a call is not content
    result.tool_calls.push_back({});
    in_call = true;
    name_sent = false;
    pending_args.clear();
    content_started = false;
  }
  void SetName(std::string name, std::string id = "") {
    if (name_sent) return;
    tracking = false;
    unnamed.clear();
    ToolCall& call = result.tool_calls.back();
    call.name = std::move(name);
    call.id = id.empty() ? opts.make_id() : std::move(id);
    ToolCallDelta& d = Delta();
    d.id = call.id;
    d.name = call.name;
    name_sent = true;
    if (!pending_args.empty()) {
      std::string a;
      a.swap(pending_args);
      EmitArgs(a);
    }
  }
  void EmitArgs(std::string_view text) {
    if (text.empty()) return;
    if (!name_sent) {
      pending_args += text;
      return;
    }
    result.tool_calls.back().arguments += text;
    Delta().arguments += text;
  }
  void EndCall() {
    if (!in_call) return;
    if (!name_sent && final) return DropUnnamedCall();
    if (!name_sent) SetName(raw_name);
    if (result.tool_calls.back().arguments.empty()) EmitArgs("{}");
    in_call = false;
  }
  // The output ended before the current call's name was complete: nothing
  // of it was sent, so the call is text, as written (its marker and its
  // section's included), and what is left of buf with it.
  void DropUnnamedCall() {
    result.tool_calls.pop_back();
    in_call = false;
    in_section = false;
    in_json_list = false;
    held_ws = before_call_ws;
    content_started = before_call_started;
    EmitContent(unnamed + buf);
    buf.clear();
    tracking = false;
    unnamed.clear();
    mode = Mode::kContent;
  }
  // At the end of the output, buf (after whitespace) is a cut-off `marker`
  // in calls already sent (a section's end, a parameter's opening): markup,
  // not content; consumed.
  bool DropCutMarker(const std::string& marker) {
    if (!final || marker.empty()) return false;
    const size_t first = buf.find_first_not_of(" \n\t\r");
    if (first == std::string::npos || buf.size() - first >= marker.size()) return false;
    if (marker.compare(0, buf.size() - first, buf, first) != 0) return false;
    Consume(buf.size());
    return true;
  }
  // Skips leading whitespace in buf; false when buf is then empty.
  bool SkipSpace() {
    const size_t first = buf.find_first_not_of(" \n\t\r");
    Consume(first == std::string::npos ? buf.size() : first);
    return !buf.empty();
  }
  // Reads a call's name up to `end` into raw_name: true once `end` is seen
  // (the name and `end` consumed). Until then false; at the final flush an
  // unterminated name ends the call (back to content).
  bool NameUntil(char end) {
    const size_t at = buf.find(end);
    if (at == std::string::npos) {
      if (final) {
        raw_name += buf;
        Consume(buf.size());
        EndCall();
        mode = Mode::kContent;
      }
      return false;
    }
    raw_name += buf.substr(0, at);
    Consume(at + 1);
    return true;
  }
  // Whether buf starts with `m`: 1 yes (consumed), 0 no, -1 undecided.
  int Expect(const std::string& m) {
    if (buf.compare(0, m.size(), m) == 0) {
      Consume(m.size());
      return 1;
    }
    if (!final && buf.size() < m.size() && m.compare(0, buf.size(), buf) == 0) return -1;
    return 0;
  }

  // --- the scanner --------------------------------------------------------------
  // Consumes what can be decided; returns when more input is needed.
  void Process() {
    for (int guard = 0; guard < 1 << 20; ++guard) {
      const size_t before = buf.size();
      const Mode mode_before = mode;
      const int stage_before = ds_stage;
      const ObjPhase phase_before = phase;
      const bool id_before = reading_id;
      const bool name_before = name_sent, section_before = in_section, list_before = in_json_list;
      Step();
      // Back in text: nothing is a call's unannounced text any more.
      if (tracking && !in_call &&
          (mode == Mode::kContent || mode == Mode::kReasoning || mode == Mode::kAtemHeader ||
           mode == Mode::kHarmonyHeader || mode == Mode::kHarmonyBody)) {
        tracking = false;
        unnamed.clear();
      }
      if (buf.size() == before && mode == mode_before && ds_stage == stage_before && phase == phase_before &&
          reading_id == id_before && name_sent == name_before && in_section == section_before &&
          in_json_list == list_before) {
        return;  // needs more input
      }
    }
  }

  void Consume(size_t n) {
    if (tracking) unnamed.append(buf, 0, n);
    buf.erase(0, n);
  }

  // Content: look for the format's start markers.
  void StepContent() {
    std::vector<std::string> markers;
    switch (format) {
      case ToolCallFormat::kHermes:
      case ToolCallFormat::kQwen3Coder: markers = {kHermesOpen}; break;
      case ToolCallFormat::kLlama3: markers = {kPythonTag}; break;
      case ToolCallFormat::kMistral: markers = {kMistralCalls}; break;
      case ToolCallFormat::kDeepSeekV3:
      case ToolCallFormat::kDeepSeekV31: markers = {kDsCallsBegin, kDsCallBegin}; break;
      case ToolCallFormat::kFunctionary: markers = {kFuncOpen, kPythonTag}; break;
      case ToolCallFormat::kHarmony: markers = {kHChannel, kHStart}; break;
      default: markers = tagged_markers; break;
    }
    if (format == ToolCallFormat::kLlama3 && !content_started && result.tool_calls.empty() && LlamaJsonStart()) return;
    size_t best = std::string::npos;
    const std::string* which = nullptr;
    for (const std::string& m : markers) {
      const size_t p = buf.find(m);
      if (p < best) {
        best = p;
        which = &m;
      }
    }
    if (which == nullptr) {
      const size_t safe = final ? buf.size() : SafePrefixLength(buf, markers);
      if (format == ToolCallFormat::kLlama3 && !final && !content_started && result.tool_calls.empty()) {
        // Leading whitespace may precede a JSON call: hold it.
        const size_t first = buf.find_first_not_of(" \n\t\r");
        if (first == std::string::npos) return;
      }
      EmitContent(std::string_view(buf).substr(0, safe));
      Consume(safe);
      return;
    }
    EmitContent(std::string_view(buf).substr(0, best));
    Consume(best);
    tracking = true;  // the marker may open a call: keep its text until the name is known
    unnamed.clear();
    Consume(which->size());
    OnMarker(*which);
  }

  // Llama 3: the whole reply is a JSON call when it starts with {"name".
  // Returns true when it consumed or must wait.
  bool LlamaJsonStart() {
    const size_t first = buf.find_first_not_of(" \n\t\r");
    if (first == std::string::npos) return !final;  // only whitespace so far
    if (buf[first] != '{') return false;
    size_t p = buf.find_first_not_of(" \n\t\r", first + 1);
    if (p == std::string::npos) return !final;
    if (buf[p] != '"') return false;
    const size_t q = buf.find('"', p + 1);
    if (q == std::string::npos) return !final && buf.size() - p < 16;
    const std::string key = buf.substr(p + 1, q - p - 1);
    if (key != "name" && key != "type") return false;
    Consume(first);
    StartJsonObjectCall();
    return true;
  }

  void OnMarker(const std::string& m) {
    if (syn != nullptr) return OnTaggedMarker(m);
    if (m == kHermesOpen) {
      StartCall();
      if (format == ToolCallFormat::kQwen3Coder) {
        mode = Mode::kRawName;  // up to <function=..>
        raw_name.clear();
        qwen_params = 0;
      } else {
        mode = Mode::kJsonObject;
        ResetObject();
      }
    } else if (m == kPythonTag) {
      StartCall();
      mode = Mode::kPythonCode;
      raw_name.clear();
    } else if (m == kMistralCalls) {
      const size_t first = buf.find_first_not_of(" \n\t\r");
      if (first == std::string::npos && !final) {
        buf.insert(0, kMistralCalls);  // undecided: list or name
        return;
      }
      if (first != std::string::npos && buf[first] == '[') {  // [TOOL_CALLS][{...}, ...]
        Consume(first + 1);
        in_mistral_list = true;
        StartJsonObjectCall();
      } else {
        StartCall();
        mode = Mode::kRawName;
        raw_name.clear();
      }
    } else if (m == kDsCallsBegin) {
      mode = Mode::kDsBetween;
    } else if (m == kDsCallBegin) {
      StartCall();
      mode = Mode::kRawName;
      raw_name.clear();
    } else if (m == kFuncOpen) {
      StartCall();
      mode = Mode::kRawName;
      raw_name.clear();
    } else if (m == kHChannel) {
      mode = Mode::kHarmonyHeader;
    } else if (m == kHStart) {
      // "<|start|>assistant": the role name up to the next marker is dropped.
      mode = Mode::kHarmonyHeader;
      harmony_channel = "start";
    }
  }

  void StartJsonObjectCall() {
    StartCall();
    mode = Mode::kJsonObject;
    ResetObject();
  }
  void ResetObject() {
    phase = ObjPhase::kOpen;
    key_text.clear();
    current_key.clear();
    name_value.clear();
    value.Reset();
  }

  void Step() {
    switch (mode) {
      case Mode::kContent: return StepContent();
      case Mode::kJsonObject: return StepObject();
      case Mode::kAfterObject: return StepAfterObject();
      case Mode::kRawName: return StepRawName();
      case Mode::kArgsValue: return StepArgsValue();
      case Mode::kArgsUntil: return StepArgsUntil();
      case Mode::kQwenParams: return StepQwenParams();
      case Mode::kPythonCode: return StepPythonCode();
      case Mode::kDsBetween: return StepDsBetween();
      case Mode::kDsAfterSep: return StepDsAfterSep();
      case Mode::kHarmonyHeader: return StepHarmonyHeader();
      case Mode::kHarmonyBody: return StepArgsUntil();
      case Mode::kSection: return StepSection();
      case Mode::kTaggedCall: return StepTaggedCall();
      case Mode::kPythonicSection: return StepPythonicSection();
      case Mode::kReasoning: return StepReasoning();
      case Mode::kAtemHeader: return StepAtemHeader();
    }
  }

  void StepObject();
  void StepAfterObject();
  void StepRawName();
  void StepArgsValue();
  void StepArgsUntil();
  void StepQwenParams();
  void StepPythonCode();
  void StepDsBetween();
  void StepDsAfterSep();
  void StepHarmonyHeader();
  void OnTaggedMarker(const std::string& m);
  void StepSection();
  void EndSection(bool closed);
  size_t FindFrom(const std::string& marker);
  void BeginTaggedCall();
  void AbortTaggedCall();
  void StepTaggedCall();
  void StepPythonicSection();
  void StepReasoning();
  void StepAtemHeader();
  void StepAfterJsonCall();
  // A tagged call's arguments as JSON: the parameters written whole, in
  // order, up to the end of `body` or the first that does not decode (then
  // *whole is false). `cut`: the output ended inside the call.
  std::string DecodeTaggedArgs(const std::string& body, bool cut, bool* whole) const;
  std::string QwenValue(const std::string& param, std::string raw) const;
};

}  // namespace kvs::grammar
