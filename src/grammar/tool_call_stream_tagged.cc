// ToolCallStreamParser steps for the formats of tool_call_syntax.h:
// sections of JSON calls (read by the JSON-object steps of
// tool_call_stream.cc), tagged calls whose name is sent as soon as it is
// complete and whose arguments are sent whole at the call's end (JSON
// arguments are streamed as they come), LFM2's pythonic lists, reasoning
// blocks and Muse Glimmer's message headers.
#include <algorithm>

#include "grammar/tool_call_stream_impl.h"
#include "grammar/tool_call_values.h"

namespace kvs::grammar {

namespace {

using B = internal::TaggedSyntax::Body;

bool JsonBody(B b) { return b == B::kJsonList || b == B::kJsonObjects; }

// The earliest occurrence in `buf` of any of `what` (npos when none).
size_t FindFirst(std::string_view buf, const std::vector<std::string>& what, const std::string** which) {
  size_t best = std::string::npos;
  for (const std::string& m : what) {
    if (m.empty()) continue;
    const size_t p = buf.find(m);
    if (p < best) {
      best = p;
      *which = &m;
    }
  }
  return best;
}

const std::string kAtemStart = "<|start|>", kAtemMessage = "<|message|>";

// Names are identifiers (with the dots and colons of namespaces); text
// after a call marker that is no name means the marker was prose.
constexpr size_t kMaxName = 256;
bool PlausibleName(const std::string& name) {
  return !name.empty() && name.size() < kMaxName && name.find_first_of(" \t\r\n<>{}()[]\"',;") == std::string::npos;
}

}  // namespace

void ToolCallStreamParser::Impl::InitTagged() {
  syn = internal::TaggedSyntaxOf(format);
  if (syn == nullptr) return;
  for (const std::string* m : {&syn->section_open, &syn->call_open, &syn->reasoning_open}) {
    if (!m->empty()) tagged_markers.push_back(*m);
  }
  // JSON and pythonic bodies need their section: a bare list is text.
  if (JsonBody(syn->body) || syn->body == B::kPythonic) {
    tagged_markers.erase(std::remove(tagged_markers.begin(), tagged_markers.end(), syn->call_open),
                         tagged_markers.end());
  }
  for (const std::string& m : syn->drop) tagged_markers.push_back(m);
  if (format == ToolCallFormat::kAtem) {
    tagged_markers.push_back(kAtemStart);
    mode = Mode::kAtemHeader;  // the generation prompt ends in "<|start|>assistant"
  }
}

void ToolCallStreamParser::Impl::OnTaggedMarker(const std::string& m) {
  if (m == syn->reasoning_open) {
    reasoning_ends = {syn->reasoning_close};
    mode = Mode::kReasoning;
  } else if (m == kAtemStart && format == ToolCallFormat::kAtem) {
    mode = Mode::kAtemHeader;
  } else if (m == syn->section_open) {
    call_id.clear();
    searched = 0;
    in_section = true;
    mode = syn->body == B::kPythonic ? Mode::kPythonicSection : Mode::kSection;
  } else if (m == syn->call_open) {
    BeginTaggedCall();
  }
  // Anything else is a marker of syn->drop: gone from the content.
}

void ToolCallStreamParser::Impl::StepSection() {
  const size_t first = buf.find_first_not_of(" \n\t\r");
  if (first == std::string::npos) {
    if (final) EndSection(/*closed=*/false);
    return;
  }
  if (JsonBody(syn->body)) {
    const char c = buf[first];
    if ((c == '[' && syn->body == B::kJsonList) || c == '{') {
      Consume(first + (c == '[' ? 1 : 0));
      in_json_list = c == '[';
      StartJsonObjectCall();
      return;
    }
    // Not a call after all ("functools" in a sentence): the marker is text.
    in_section = false;
    EmitContent(syn->section_open);
    mode = Mode::kContent;
    return;
  }
  Consume(first);
  const int call = Expect(syn->call_open);
  if (call < 0) return;
  if (call == 1) {
    BeginTaggedCall();
    return;
  }
  bool closed = DropCutMarker(syn->section_close);
  if (!closed && !syn->section_close.empty()) {
    const int close = Expect(syn->section_close);
    if (close < 0) return;
    closed = close == 1;
  }
  EndSection(closed);
}

void ToolCallStreamParser::Impl::EndSection(bool closed) {
  // A section that holds no call and did not close was text, its marker
  // included (a reply cut right after it; a marker in prose).
  if (!closed && tracking) {
    EmitContent(unnamed);
    tracking = false;
    unnamed.clear();
  }
  in_section = false;
  mode = Mode::kContent;
}

void ToolCallStreamParser::Impl::StepAfterJsonCall() {
  if (!SkipSpace()) {
    if (final) mode = Mode::kContent;
    return;
  }
  if (in_json_list) {
    if (buf[0] == ',') {
      Consume(1);
      call_id.clear();
      StartJsonObjectCall();
      return;
    }
    if (buf[0] == ']') Consume(1);
    in_json_list = false;
    return;
  }
  if (syn->body == B::kJsonObjects && buf[0] == '{') {
    call_id.clear();
    StartJsonObjectCall();
    return;
  }
  if (!DropCutMarker(syn->section_close) && !syn->section_close.empty() && Expect(syn->section_close) < 0) return;
  in_section = false;
  mode = Mode::kContent;
}

void ToolCallStreamParser::Impl::BeginTaggedCall() {
  searched = 0;
  StartCall();
  mode = Mode::kTaggedCall;
}

void ToolCallStreamParser::Impl::AbortTaggedCall() {
  result.tool_calls.pop_back();
  in_call = false;
  in_section = false;
  held_ws = before_call_ws;
  content_started = before_call_started;
  EmitContent(unnamed);  // the marker (and its section's) as written
  tracking = false;
  unnamed.clear();
  mode = Mode::kContent;  // what followed the marker is scanned as text
}

// Where to look for `marker` in buf: past what an earlier look found
// without it, so a long buffered call is scanned once, not per chunk.
size_t ToolCallStreamParser::Impl::FindFrom(const std::string& marker) {
  const size_t from = searched >= marker.size() ? searched - marker.size() + 1 : 0;
  const size_t at = buf.find(marker, from);
  searched = at == std::string::npos ? buf.size() : 0;
  return at;
}

void ToolCallStreamParser::Impl::StepTaggedCall() {
  if (!name_sent) {
    const size_t close = buf.find(syn->call_close);  // waited for kMaxName bytes at most
    const std::string* which = nullptr;
    size_t end = FindFirst(buf, syn->name_ends, &which);
    bool keep = syn->keep_name_end;
    if (close < end) {  // a call without arguments
      end = close;
      keep = true;
    }
    if (end == std::string::npos) {
      if (final) return DropUnnamedCall();  // the output ended inside the name
      if (buf.size() < kMaxName) return;
      return AbortTaggedCall();
    }
    std::string name = internal::CleanCallName(format, buf.substr(0, end));
    if (!PlausibleName(name)) return AbortTaggedCall();
    SetName(std::move(name));
    Consume(end + (keep || which == nullptr ? 0 : which->size()));
    searched = 0;
    return;
  }
  const size_t close = syn->body == B::kJsonArgs ? buf.find(syn->call_close) : FindFrom(syn->call_close);
  if (syn->body == B::kJsonArgs) {  // streamed as written (buf stays short)
    if (close == std::string::npos) {
      // At the end a cut-off call_close is markup: the arguments stop before it.
      const size_t safe = SafePrefixLength(buf, {syn->call_close});
      EmitArgs(std::string_view(buf).substr(0, safe));
      Consume(final ? buf.size() : safe);
      if (final) {
        EndCall();
        mode = Mode::kContent;
      }
      return;
    }
    EmitArgs(std::string_view(buf).substr(0, close));
    Consume(close + syn->call_close.size());
  } else {
    if (close == std::string::npos && !final) return;  // arguments are decoded whole
    searched = 0;
    const bool cut = close == std::string::npos;  // the output ended inside the call
    const size_t end = cut ? buf.size() : close;
    bool whole = true;
    const std::string args = DecodeTaggedArgs(buf.substr(0, end), cut, &whole);
    if (!cut && !whole) undecodable = true;
    Consume(end + (close == std::string::npos ? 0 : syn->call_close.size()));
    EmitArgs(args);
  }
  EndCall();
  mode = in_section ? Mode::kSection : Mode::kContent;
}

std::string ToolCallStreamParser::Impl::DecodeTaggedArgs(const std::string& body, bool cut, bool* whole) const {
  const std::string& fname = result.tool_calls.back().name;
  Json args = Json::object();
  auto skip_ws = [&](size_t p) {
    while (p < body.size() && IsSpace(body[p])) ++p;
    return p;
  };
  // Between two tags: the text, the position after the closing tag.
  auto between = [&](size_t from, const std::string& close, std::string* text) {
    const size_t e = body.find(close, from);
    if (e == std::string::npos) return std::string::npos;
    *text = body.substr(from, e - from);
    return e + close.size();
  };
  bool ok = true;
  switch (syn->body) {
    case B::kKeyValue:
      for (size_t p = skip_ws(0); ok && p < body.size(); p = skip_ws(p)) {
        std::string key, value;
        ok = body.compare(p, syn->key_open.size(), syn->key_open) == 0;
        if (ok) p = between(p + syn->key_open.size(), syn->key_close, &key);
        if (ok && p != std::string::npos) p = skip_ws(p);
        ok = ok && p != std::string::npos && body.compare(p, syn->value_open.size(), syn->value_open) == 0;
        if (ok) p = between(p + syn->value_open.size(), syn->value_close, &value);
        ok = ok && p != std::string::npos;
        if (ok) args[key] = internal::TextValue(value, internal::ParameterSchema(opts.tools, fname, key));
      }
      break;
    case B::kNamedParams:
      for (size_t p = skip_ws(0); ok && p < body.size(); p = skip_ws(p)) {
        ok = body.compare(p, syn->param_open.size(), syn->param_open) == 0;
        if (!ok) break;
        p += syn->param_open.size();
        const size_t name_end = body.find_first_of("\">", p), gt = body.find('>', p);
        ok = name_end != std::string::npos && gt != std::string::npos;
        if (!ok) break;
        const std::string key = body.substr(p, name_end - p), attrs = body.substr(name_end, gt - name_end);
        std::string value;
        p = between(gt + 1, syn->param_close, &value);
        ok = p != std::string::npos;
        if (!ok) break;
        const std::string cdata = "<![CDATA[";
        if (value.rfind(cdata, 0) == 0 && value.size() >= cdata.size() + 3 &&
            value.compare(value.size() - 3, 3, "]]>") == 0) {
          args[key] = value.substr(cdata.size(), value.size() - cdata.size() - 3);
        } else if (attrs.find("string=\"true\"") != std::string::npos) {  // DSML says which values are strings
          args[key] = value;
        } else {
          args[key] = internal::TextValue(value, internal::ParameterSchema(opts.tools, fname, key));
        }
      }
      break;
    case B::kMiniMaxXml: {
      Json schema;
      if (opts.tools.is_array()) {
        for (const Json& t : opts.tools) {
          const Json& f = t.is_object() && t.contains("function") ? t["function"] : t;
          if (f.is_object() && f.value("name", "") == fname && f.contains("parameters")) schema = f["parameters"];
        }
      }
      auto v = cut ? std::nullopt : internal::ParseMiniMaxXml(body, syn->param_open, schema);
      ok = v.has_value();
      args = ok ? std::move(*v) : internal::MiniMaxXmlPrefix(body, syn->param_open, schema);
      break;
    }
    case B::kGemma: {
      std::string inner = body;
      while (!inner.empty() && IsSpace(inner.back())) inner.pop_back();
      if (!cut && !inner.empty() && inner.back() == '}') inner.pop_back();
      auto v = cut ? std::nullopt : internal::ParseGemmaArguments(inner);
      ok = v.has_value();
      args = ok ? std::move(*v) : internal::GemmaArgumentsPrefix(body);
      break;
    }
    default: ok = false; break;
  }
  // What did not decode (a fault, or the cut) is left out: arguments are
  // always a JSON object, never the markup as written.
  *whole = ok;
  return args.dump();
}

void ToolCallStreamParser::Impl::StepPythonicSection() {
  const size_t close = FindFrom(syn->section_close);
  if (close == std::string::npos && !final) return;
  const size_t end = close == std::string::npos ? buf.size() : close;
  const std::string text = buf.substr(0, end);
  Consume(end + (close == std::string::npos ? 0 : syn->section_close.size()));
  in_section = false;
  mode = Mode::kContent;
  auto calls = internal::ParsePythonicCalls(text);
  if (!calls) {
    EmitContent(syn->section_open + text + (close == std::string::npos ? "" : syn->section_close));
    return;
  }
  for (auto& [name, args] : *calls) {
    StartCall();
    SetName(name);
    EmitArgs(args.dump());
    EndCall();
  }
}

void ToolCallStreamParser::Impl::StepReasoning() {
  const std::string* which = nullptr;
  const size_t end = FindFirst(buf, reasoning_ends, &which);
  if (end == std::string::npos) {
    const size_t safe = final ? buf.size() : SafePrefixLength(buf, reasoning_ends);
    EmitReasoning(std::string_view(buf).substr(0, safe));
    Consume(safe);
    if (final) mode = Mode::kContent;
    return;
  }
  EmitReasoning(std::string_view(buf).substr(0, end));
  // Muse Glimmer: <|start|> begins the next message; leave it to content.
  Consume(end + (*which == kAtemStart ? 0 : which->size()));
  mode = Mode::kContent;
}

void ToolCallStreamParser::Impl::StepAtemHeader() {
  // "assistant to=RECIPIENT<|message|>" (after <|start|>), or at the very
  // start " to=RECIPIENT<|message|>". Anything else is content.
  const size_t p = buf.find(kAtemMessage);
  const std::string head = buf.substr(0, p);
  std::string_view h(head);
  while (!h.empty() && IsSpace(h.front())) h.remove_prefix(1);
  const std::string_view role = "assistant";
  if (p == std::string::npos && !final && role.substr(0, std::min(h.size(), role.size())) == h) return;
  if (h.substr(0, role.size()) == role) h.remove_prefix(role.size());
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  const std::string_view to = "to=";
  const bool plausible = h.substr(0, std::min(h.size(), to.size())) == to.substr(0, std::min(h.size(), to.size())) &&
                         h.find('\n') == std::string_view::npos && h.size() < 256;
  if (!plausible || (p == std::string::npos && final)) {
    mode = Mode::kContent;
    return;
  }
  if (p == std::string::npos) return;
  std::string recipient(h.substr(std::min(h.size(), to.size())));
  recipient = recipient.substr(0, recipient.find(' '));
  Consume(p + kAtemMessage.size());
  if (recipient == "self") {
    reasoning_ends = {"<|eom|>", "<|eot|>", kAtemStart};
    mode = Mode::kReasoning;
  } else {
    mode = Mode::kContent;  // the answer, or a tool's <atem:function_calls> block
  }
}

}  // namespace kvs::grammar
