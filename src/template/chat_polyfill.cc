#include "template/chat_polyfill.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include <fmt/format.h>

namespace kvs::tmpl {
namespace {

using Json = nlohmann::ordered_json;

bool IsRole(const Json& m, const char* role) {
  if (!m.is_object()) return false;
  auto it = m.find("role");
  return it != m.end() && it->is_string() && it->get_ref<const std::string&>() == role;
}

bool HasToolCalls(const Json& m) {
  if (!IsRole(m, "assistant")) return false;
  auto it = m.find("tool_calls");
  return it != m.end() && it->is_array() && !it->empty();
}

// The text of a content value: a string, the text parts of a list, or ""
// (null, absent).
std::string ContentText(const Json& m) {
  auto it = m.find("content");
  if (it == m.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  std::string out;
  if (it->is_array()) {
    for (const Json& part : *it) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string()) {
        out += part["text"].get<std::string>();
      }
    }
  }
  return out;
}

// Adds text before (or after) a message's content, keeping non-text parts
// of a list (a user message with an image keeps it).
void AddText(Json* m, const std::string& text, bool before) {
  Json& c = (*m)["content"];
  if (c.is_array()) {
    Json part = {{"type", "text"}, {"text", text}};
    if (before) {
      c.insert(c.begin(), std::move(part));
    } else {
      c.push_back(std::move(part));
    }
    return;
  }
  const std::string old = c.is_string() ? c.get<std::string>() : "";
  if (old.empty()) {
    c = text;
  } else {
    c = before ? text + "\n\n" + old : old + "\n\n" + text;
  }
}

// Arguments as JSON text: JSON text is kept as written, an object is
// dumped, text that is not JSON becomes a JSON string (so the call still
// parses).
std::string ArgumentsText(const Json& call) {
  const Json* f = call.is_object() && call.contains("function") ? &call["function"] : &call;
  if (!f->is_object() || !f->contains("arguments")) return "{}";
  const Json& a = (*f)["arguments"];
  if (a.is_string()) {
    const std::string& s = a.get_ref<const std::string&>();
    if (!Json::parse(s, nullptr, false).is_discarded()) return s;
    return Json(s).dump();
  }
  return a.dump();
}

std::string CallName(const Json& call) {
  const Json* f = call.is_object() && call.contains("function") ? &call["function"] : &call;
  if (f->is_object() && f->contains("name") && (*f)["name"].is_string()) return (*f)["name"].get<std::string>();
  return "";
}

// One call in Qwen3-Coder's XML form; arguments that are not a JSON object
// fall back to the Hermes body (the parser reads that inside <tool_call> too).
std::string QwenCoderCall(const std::string& name, const std::string& args) {
  const Json obj = Json::parse(args, nullptr, false);
  if (!obj.is_object()) return "<tool_call>\n{\"name\": " + Json(name).dump() + ", \"arguments\": " + args + "}\n</tool_call>";
  std::string out = "<tool_call>\n<function=" + name + ">\n";
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    out += "<parameter=" + it.key() + ">\n" + (it->is_string() ? it->get<std::string>() : it->dump()) + "\n</parameter>\n";
  }
  return out + "</function>\n</tool_call>";
}

// 9 alphanumerics derived from id (FNV-1a, base 62): equal ids map equally,
// so a result still names its call.
std::string NineAlnum(const std::string& id) {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
  std::string out;
  for (int i = 0; i < 9; ++i, h /= 62) out += kAlnum[h % 62];
  return out;
}

bool IsNineAlnum(const std::string& id) {
  return id.size() == 9 && std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isalnum(c) != 0; });
}

void MapId(Json* v) {
  if (v->is_string() && !IsNineAlnum(v->get<std::string>())) *v = NineAlnum(v->get<std::string>());
}

// A JSON value as a Python literal (LFM2's pythonic calls): strings in single
// quotes with backslash escapes, true/false/null as True/False/None.
std::string PythonLiteral(const Json& v) {
  if (v.is_string()) {
    std::string out = "'";
    for (char c : v.get<std::string>()) {
      if (c == '\\' || c == '\'') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    return out + "'";
  }
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + PythonLiteral(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      out += (first ? "" : ", ") + PythonLiteral(Json(k)) + ": " + PythonLiteral(x);
      first = false;
    }
    return out + "}";
  }
  return v.dump();  // numbers
}

// name(k=v, ...) from the arguments' JSON text (not an object: no arguments).
std::string PythonCall(const std::string& name, const std::string& arguments) {
  const Json args = Json::parse(arguments, nullptr, false);
  std::string out = name + "(";
  if (args.is_object()) {
    bool first = true;
    for (const auto& [k, x] : args.items()) {
      out += (first ? "" : ", ") + k + "=" + PythonLiteral(x);
      first = false;
    }
  }
  return out + ")";
}

// One call's text (name, arguments as JSON text).
using CallText = std::string (*)(const std::string& name, const std::string& arguments);

// How a syntax writes a list of calls: open, the calls joined by sep, close.
struct CallWriter {
  const char* syntax;
  const char* open;
  const char* sep;
  const char* close;
  CallText one;
};

// Every syntax the polyfills can write: the first is the fallback.
constexpr CallWriter kCallWriters[] = {
    {"hermes", "", "\n", "",
     [](const std::string& n, const std::string& a) {
       return "<tool_call>\n{\"name\": " + Json(n).dump() + ", \"arguments\": " + a + "}\n</tool_call>";
     }},
    {"llama3_json", "", ";", "",
     [](const std::string& n, const std::string& a) {
       return "{\"name\": " + Json(n).dump() + ", \"parameters\": " + a + "}";
     }},
    {"mistral", "", "", "", [](const std::string& n, const std::string& a) { return "[TOOL_CALLS]" + n + "[ARGS]" + a; }},
    {"deepseek_v3", "<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>",
     [](const std::string& n, const std::string& a) {
       return "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n" + a + "\n```<｜tool▁call▁end｜>";
     }},
    {"deepseek_v31", "<｜tool▁calls▁begin｜>", "", "<｜tool▁calls▁end｜>",
     [](const std::string& n, const std::string& a) {
       return "<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>" + a + "<｜tool▁call▁end｜>";
     }},
    {"functionary_v3_1", "", "", "",
     [](const std::string& n, const std::string& a) { return "<function=" + n + ">" + a + "</function>"; }},
    {"harmony", "", "", "",
     [](const std::string& n, const std::string& a) {
       return "<|channel|>commentary to=functions." + n + " <|constrain|>json<|message|>" + a + "<|call|>";
     }},
    {"qwen3_coder", "", "\n", "", QwenCoderCall},
    {"lfm2", "<|tool_call_start|>[", ", ", "]<|tool_call_end|>", PythonCall},
};

const CallWriter& WriterFor(const std::string& syntax) {
  for (const CallWriter& w : kCallWriters) {
    if (syntax == w.syntax) return w;
  }
  return kCallWriters[0];
}

}  // namespace

const char* EffectiveToolCallSyntax(const std::string& syntax) { return WriterFor(syntax).syntax; }

std::string WriteToolCalls(const std::string& syntax, const Json& tool_calls) {
  if (!tool_calls.is_array()) return "";
  const CallWriter& w = WriterFor(syntax);
  std::string out = w.open;
  bool first = true;
  for (const Json& c : tool_calls) {
    if (!first) out += w.sep;
    out += w.one(CallName(c), ArgumentsText(c));
    first = false;
  }
  return out + w.close;
}

std::string ToolInstruction(const std::string& syntax, const Json& tools) {
  std::string out = "# Tools\n\nYou may call one or more of these functions (the JSON Schema of their arguments "
                    "is under \"parameters\"):\n";
  std::string example_name = "function_name";
  Json example_args = {{"argument", "value"}};
  bool first = true;
  for (const Json& t : tools) {
    out += t.dump() + "\n";
    const Json& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!first || !f.is_object()) continue;
    first = false;
    if (f.contains("name") && f["name"].is_string()) example_name = f["name"].get<std::string>();
    if (f.contains("parameters") && f["parameters"].is_object() && f["parameters"].contains("properties") &&
        f["parameters"]["properties"].is_object() && !f["parameters"]["properties"].empty()) {
      example_args = Json{{f["parameters"]["properties"].begin().key(), "..."}};
    }
  }
  const Json example = Json::array({{{"type", "function"}, {"function", {{"name", example_name}, {"arguments", example_args.dump()}}}}});
  out += "\nTo call a function, reply with the call written like this (one after another for several calls):\n";
  out += WriteToolCalls(syntax, example) + "\n";
  out += "The arguments are a JSON object. Each result comes back in a later message.";
  return out;
}

StatusOr<ChatRequest> ApplyChatPolyfills(const ChatCapabilities& caps, const std::string& syntax,
                                         const ChatRequest& request, std::vector<std::string>* applied) {
  ChatRequest r = request;
  if (!caps.probed || !r.messages.is_array()) return r;
  auto mark = [&](const char* name) {
    if (applied && std::find(applied->begin(), applied->end(), name) == applied->end()) applied->emplace_back(name);
  };
  Json& msgs = r.messages;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (!msgs[i].is_object()) return InvalidArgument("messages[{}] must be an object", i);
  }

  // Tool names by call id, for results that do not name their tool (the API's
  // tool messages carry only tool_call_id).
  std::map<std::string, std::string> name_of_call;
  for (const Json& m : msgs) {
    if (!HasToolCalls(m)) continue;
    for (const Json& c : m["tool_calls"]) {
      if (c.is_object() && c.contains("id") && c["id"].is_string()) name_of_call[c["id"].get<std::string>()] = CallName(c);
    }
  }

  for (Json& m : msgs) {
    if (!HasToolCalls(m)) continue;
    if (!caps.tool_calls) {
      const std::string calls = WriteToolCalls(syntax, m["tool_calls"]);
      const std::string text = ContentText(m);
      m["content"] = text.empty() ? calls : text + "\n" + calls;
      m.erase("tool_calls");
      mark("tool-calls-as-text");
      continue;
    }
    auto content = m.find("content");
    const bool null_content = content == m.end() || content->is_null();
    if (caps.content_with_calls == ContentWithCalls::kNullToEmpty && null_content) {
      m["content"] = "";
      mark("null-content");
    } else if (caps.content_with_calls == ContentWithCalls::kEmptyToNull && !null_content && content->is_string() &&
               content->get_ref<const std::string&>().empty()) {
      m["content"] = nullptr;
      mark("empty-content");
    }
    for (Json& c : m["tool_calls"]) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
      Json& f = c["function"];
      if (!f.contains("arguments")) continue;
      Json& a = f["arguments"];
      if (caps.arguments == ArgumentsForm::kObject && a.is_string()) {
        Json parsed = Json::parse(a.get_ref<const std::string&>(), nullptr, false);
        if (parsed.is_object()) {
          a = std::move(parsed);
          mark("object-arguments");
        }
      } else if (caps.arguments == ArgumentsForm::kString && !a.is_string()) {
        a = a.dump();
        mark("string-arguments");
      }
    }
  }

  if (!caps.any_call_id) {
    for (Json& m : msgs) {
      const Json before = m;
      if (HasToolCalls(m)) {
        for (Json& c : m["tool_calls"]) {
          if (c.is_object() && c.contains("id")) MapId(&c["id"]);
        }
      }
      if (IsRole(m, "tool") && m.contains("tool_call_id")) MapId(&m["tool_call_id"]);
      if (m != before) mark("call-ids");
    }
  }

  if (!caps.tool_role) {
    Json out = Json::array();
    std::string pending;  // results not yet placed
    auto flush = [&](Json* next_user) {
      if (pending.empty()) return;
      if (next_user) {
        AddText(next_user, pending, /*before=*/true);
      } else {
        out.push_back(Json{{"role", "user"}, {"content", pending}});
      }
      pending.clear();
    };
    for (Json& m : msgs) {
      if (IsRole(m, "tool")) {
        std::string id = m.contains("tool_call_id") && m["tool_call_id"].is_string() ? m["tool_call_id"].get<std::string>() : "";
        std::string name = m.contains("name") && m["name"].is_string() ? m["name"].get<std::string>() : "";
        if (name.empty() && name_of_call.count(id)) name = name_of_call[id];
        if (!pending.empty()) pending += "\n\n";
        pending += fmt::format("Result of the tool call{}{}:\n{}", name.empty() ? "" : " " + name,
                               id.empty() ? "" : " (id " + id + ")", ContentText(m));
        mark("tool-results-as-user");
        continue;
      }
      if (IsRole(m, "user")) {
        flush(&m);
      } else {
        flush(nullptr);
      }
      out.push_back(std::move(m));
    }
    flush(nullptr);
    msgs = std::move(out);
  }

  if (!caps.null_tools && r.tools.is_null()) {
    r.tools = Json::array();
    mark("tools-list");
  }
  if (!caps.descriptions_optional && r.tools.is_array()) {
    bool added = false;
    auto describe = [&](Json* o) {
      if (o->is_object() && !o->contains("description")) {
        (*o)["description"] = "";
        added = true;
      }
    };
    for (Json& t : r.tools) {
      Json* f = t.is_object() && t.contains("function") ? &t["function"] : &t;
      describe(f);
      if (!f->is_object() || !f->contains("parameters") || !(*f)["parameters"].is_object()) continue;
      Json& params = (*f)["parameters"];
      if (!params.contains("properties") || !params["properties"].is_object()) continue;
      for (auto& [key, prop] : params["properties"].items()) describe(&prop);
    }
    if (added) mark("tool-descriptions");
  }

  if (!caps.tools && r.tools.is_array() && !r.tools.empty()) {
    const std::string instruction = ToolInstruction(syntax, r.tools);
    if (!msgs.empty() && IsRole(msgs[0], "system")) {
      AddText(&msgs[0], instruction, /*before=*/false);
    } else {
      msgs.insert(msgs.begin(), Json{{"role", "system"}, {"content", instruction}});
    }
    mark("tool-definitions-in-system");
  }

  if (!caps.system_role) {
    Json out = Json::array();
    std::string pending;
    for (Json& m : msgs) {
      if (IsRole(m, "system")) {
        const std::string text = ContentText(m);
        if (!text.empty()) pending += (pending.empty() ? "" : "\n\n") + text;
        mark("system-into-user");
        continue;
      }
      if (!pending.empty() && IsRole(m, "user")) {
        AddText(&m, pending, /*before=*/true);
        pending.clear();
      }
      out.push_back(std::move(m));
    }
    if (!pending.empty()) out.push_back(Json{{"role", "user"}, {"content", pending}});
    msgs = std::move(out);
  }
  return r;
}

}  // namespace kvs::tmpl
