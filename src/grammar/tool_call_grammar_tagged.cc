// Forced-call grammars of the formats of tool_call_syntax.h: each call in
// the layout its chat template renders (tool_call_templates_test checks
// that every grammar accepts its template's own rendering), arguments as
// JSON valid against the schema or, for the syntaxes that write parameters
// one by one, each declared parameter in schema order (strings raw, other
// values JSON or the syntax's own nested form).
#include <algorithm>

#include "grammar/json_schema.h"
#include "grammar/tool_call_grammar_internal.h"
#include "grammar/tool_call_syntax.h"

namespace kvs::grammar::internal {

namespace {

using Json = nlohmann::ordered_json;
using B = TaggedSyntax::Body;

std::string Q(const std::string& s) { return GbnfQuote(s); }

// The schema's JSON grammar (its start rule's name), rules appended.
StatusOr<std::string> JsonRule(const ToolFunction& f, const Json& schema, const std::string& prefix,
                               std::string* rules) {
  auto text = JsonSchemaToGbnf(schema, {}, prefix);
  if (!text.ok()) return text.status().WithContext("parameters of function '" + f.name + "'");
  *rules += *text;
  return prefix + "root";
}

std::string Type(const Json& schema) {
  return schema.is_object() && schema.contains("type") && schema["type"].is_string() ? schema["type"].get<std::string>()
                                                                                     : "";
}

// Gemma 4's literals: strings in <|"|>, objects {key:value,...} with bare
// keys in sorted order, arrays [..]; scalars and anything else as JSON
// (which its parser reads too).
StatusOr<std::string> GemmaValue(const ToolFunction& f, const std::string& name, const Json& schema,
                                 const std::string& prefix, std::string* rules) {
  const std::string type = Type(schema);
  const std::string quote = Q("<|\"|>");
  if (type == "string") {
    if (schema.contains("enum") && schema["enum"].is_array()) {
      std::string alts;
      for (const Json& e : schema["enum"]) {
        if (e.is_string()) alts += (alts.empty() ? "" : " | ") + Q("<|\"|>" + e.get<std::string>() + "<|\"|>");
      }
      if (alts.empty()) return InvalidArgument("parameter '{}' of '{}' has no string enum value", name, f.name);
      return "(" + alts + ")";
    }
    auto raw = RawStringRule(f, name, schema, "[^<]");
    if (!raw.ok()) return JsonRule(f, schema, prefix, rules);  // a format or pattern: a JSON string
    return quote + " " + *raw + " " + quote;
  }
  if (type == "object" && schema.contains("properties")) {
    ParamStyle style;
    style.sorted = true;
    style.sep = ",";
    style.value = GemmaValue;
    style.item = [](const std::string& key, const std::string& value, bool) { return Q(key + ":") + " " + value; };
    KVS_ASSIGN_OR_RETURN(std::string seq, ParamSequence(ToolFunction{f.name, schema}, prefix, style, rules));
    return Q("{") + " " + seq + " " + Q("}");
  }
  if (type == "array" && schema.contains("items")) {
    KVS_ASSIGN_OR_RETURN(std::string item, GemmaValue(f, name, schema["items"], prefix + "i-", rules));
    return Q("[") + " (" + item + " (" + Q(",") + " " + item + ")*)? " + Q("]");
  }
  return JsonRule(f, schema, prefix, rules);
}

const std::string kMiniMaxNs = "]<]minimax[>[";

// MiniMax-M3's values: strings raw, objects and arrays as nested elements.
StatusOr<std::string> MiniMaxValue(const ToolFunction& f, const std::string& name, const Json& schema,
                                   const std::string& prefix, std::string* rules) {
  const std::string type = Type(schema);
  if (type == "string") return RawStringRule(f, name, schema, "[^<]");
  // Objects and arrays as elements where their parts can be written so
  // (else as JSON, which its parser reads too).
  std::string elements_rules;
  StatusOr<std::string> elements = Unimplemented("not as elements");
  if (type == "object" && schema.contains("properties")) {
    ParamStyle style;
    style.value = MiniMaxValue;
    style.item = [](const std::string& key, const std::string& value, bool) {
      return Q(kMiniMaxNs + "<" + key + ">") + " " + value + " " + Q(kMiniMaxNs + "</" + key + ">");
    };
    elements = ParamSequence(ToolFunction{f.name, schema}, prefix, style, &elements_rules);
  } else if (type == "array" && schema.contains("items")) {
    auto item = MiniMaxValue(f, name, schema["items"], prefix + "i-", &elements_rules);
    if (item.ok()) elements = "(" + Q(kMiniMaxNs + "<item>") + " " + *item + " " + Q(kMiniMaxNs + "</item>") + ")*";
  }
  if (elements.ok()) {
    *rules += elements_rules;
    return elements;
  }
  return JsonRule(f, schema, prefix, rules);
}

// A JSON call object of the JSON-section formats.
StatusOr<std::string> JsonCall(ToolCallFormat format, const ToolFunction& f, const std::string& prefix,
                               std::string* rules) {
  KVS_ASSIGN_OR_RETURN(std::string args, JsonRule(f, f.parameters, prefix, rules));
  const std::string name = Json(f.name).dump();
  switch (format) {
    case ToolCallFormat::kCommandR:
      return Q("{\"tool_call_id\": \"") + " [0-9]{1,3} " + Q("\", \"tool_name\": " + name + ", \"parameters\": ") +
             " " + args + " " + Q("}");
    case ToolCallFormat::kApertus: return Q("{" + name + ": ") + " " + args + " " + Q("}");
    case ToolCallFormat::kApriel:  // earlier turns carry the call's id
      return Q("{\"name\": " + name + ", \"arguments\": ") + " " + args + " (" + Q(", \"id\": \"") +
             " [A-Za-z0-9_-]{1,40} " + Q("\"") + ")? " + Q("}");
    default: return Q("{\"name\": " + name + ", \"arguments\": ") + " " + args + " " + Q("}");
  }
}

// One call of a tagged format: the call markers, the name and the
// arguments in the format's layout.
StatusOr<std::string> TaggedCall(ToolCallFormat format, const TaggedSyntax& s, const ToolFunction& f,
                                 const std::string& prefix, std::string* rules) {
  const std::string nl = s.newline_between ? Q("\n") + "?" : "";
  ParamStyle style;
  switch (s.body) {
    case B::kJsonArgs: {
      KVS_ASSIGN_OR_RETURN(std::string args, JsonRule(f, f.parameters, prefix, rules));
      if (format == ToolCallFormat::kKimiK2) {
        return Q(s.call_open + "functions." + f.name + ":") + " [0-9]{1,3} " + Q(s.name_ends[0]) + " " + args + " " +
               Q(s.call_close);
      }
      // Solar Open: the call's id (10 of [a-z0-9], as its prompt asks) first.
      return Q(s.call_open) + " [a-z0-9]{10} " + Q("<|tool_call:name|>" + f.name + s.name_ends[0]) + " " + args +
             " " + Q(s.call_close);
    }
    case B::kKeyValue:
      style.item = [&s, nl](const std::string& key, const std::string& value, bool) {
        return nl + " " + Q(s.key_open + key + s.key_close) + " " + nl + " " + Q(s.value_open) + " " + value + " " +
               Q(s.value_close);
      };
      break;
    case B::kNamedParams:
      style.item = [&s, format](const std::string& key, const std::string& value, bool is_string) {
        // Seed-OSS writes <parameter=KEY>, the others name="KEY"; DSML says
        // which values are strings.
        std::string open = s.param_open + key + (s.param_open.back() == '"' ? "\"" : "");
        if (format == ToolCallFormat::kDeepSeekV32 || format == ToolCallFormat::kDeepSeekV4) {
          open += is_string ? " string=\"true\"" : " string=\"false\"";
        }
        return Q(open + ">") + " " + value + " " + Q(s.param_close) + " " + Q("\n") + "?";
      };
      if (format == ToolCallFormat::kMiniCpm5) style.raw_chars = "[^<&\\n]";  // else it writes CDATA
      break;
    case B::kMiniMaxXml:
      style.value = MiniMaxValue;
      style.item = [](const std::string& key, const std::string& value, bool) {
        return Q(kMiniMaxNs + "<" + key + ">") + " " + value + " " + Q(kMiniMaxNs + "</" + key + ">");
      };
      break;
    case B::kGemma:
      style.value = GemmaValue;
      style.sorted = true;  // the template writes arguments | dictsort
      style.sep = ",";
      style.item = [](const std::string& key, const std::string& value, bool) { return Q(key + ":") + " " + value; };
      break;
    default: return Internal("no call layout for this body");
  }
  KVS_ASSIGN_OR_RETURN(std::string params, ParamSequence(f, prefix, style, rules));
  const std::string head = s.call_open + f.name + (s.keep_name_end ? "" : s.name_ends[0]);
  if (s.body == B::kKeyValue || s.body == B::kGemma) {
    return Q(head) + " " + params + " " + nl + " " + Q((s.body == B::kGemma ? "}" : "") + s.call_close);
  }
  return Q(head) + " " + Q("\n") + "? " + params + " " + Q(s.call_close);
}

// LFM2: name(key=value, ...) with strings in single quotes, other values
// JSON (its parser reads Python and JSON literals).
StatusOr<std::string> PythonicCall(const ToolFunction& f, const std::string& prefix, std::string* rules) {
  ParamStyle style;
  style.sep = ", ";
  style.raw_chars = "[^'\\n]";
  style.item = [](const std::string& key, const std::string& value, bool is_string) {
    return Q(key + "=") + " " + (is_string ? Q("'") + " " + value + " " + Q("'") : value);
  };
  KVS_ASSIGN_OR_RETURN(std::string params, ParamSequence(f, prefix, style, rules));
  return Q(f.name + "(") + " " + params + " " + Q(")");
}

}  // namespace

StatusOr<std::string> TaggedToolCallGbnf(ToolCallFormat format, const std::vector<ToolFunction>& fns, bool parallel) {
  const TaggedSyntax* s = TaggedSyntaxOf(format);
  if (s == nullptr) return Internal("not a tagged tool-call format");
  std::string rules, any;
  for (size_t i = 0; i < fns.size(); ++i) {
    const std::string prefix = "fn" + std::to_string(i) + "-";
    std::string call;
    if (s->body == B::kJsonList || s->body == B::kJsonObjects) {
      KVS_ASSIGN_OR_RETURN(call, JsonCall(format, fns[i], prefix, &rules));
    } else if (s->body == B::kPythonic) {
      KVS_ASSIGN_OR_RETURN(call, PythonicCall(fns[i], prefix, &rules));
    } else {
      KVS_ASSIGN_OR_RETURN(call, TaggedCall(format, *s, fns[i], prefix, &rules));
    }
    // Muse Glimmer: each call is a message addressed to the function;
    // Seed-OSS: each call in its own section.
    if (format == ToolCallFormat::kAtem) {
      call = Q("to=" + fns[i].name + "<|message|>" + s->section_open + "\n") + " " + call + " " +
             Q("\n" + s->section_close);
    } else if (format == ToolCallFormat::kSeedOss) {
      call = Q(s->section_open + "\n") + " " + call + " " + Q("\n" + s->section_close);
    }
    rules += prefix + "call ::= " + call + "\n";
    any += (any.empty() ? "" : " | ") + prefix + "call";
  }
  any = "(" + any + ")";
  // Several calls where the syntax has a way to write them; what goes
  // between two calls and around all of them.
  const bool multi = parallel && format != ToolCallFormat::kGigaChat3 && format != ToolCallFormat::kGigaChat31;
  std::string sep, open = s->section_open, close = s->section_close;
  switch (s->body) {
    case B::kJsonList:
      sep = format == ToolCallFormat::kCommandR ? Q(",") + " [ \\n]{0,8}" : Q(", ");
      open += "[";
      close = "]" + close;
      break;
    case B::kJsonObjects: sep = Q("\n"); break;
    case B::kPythonic:
      sep = Q(", ");
      open += "[";
      close = "]" + close;
      break;
    default: sep = s->newline_between ? Q("\n") + "?" : ""; break;
  }
  std::string body = multi ? any + " (" + sep + " " + any + ")*" : any;
  std::string lead = "[ \\n]{0,2}";  // after the generation prompt's last token
  switch (format) {
    case ToolCallFormat::kCommandR: body = "[ \\n]{0,8} " + body + " [ \\n]{0,4}"; break;
    case ToolCallFormat::kMiniMaxM1: body = Q("\n") + " " + body + " " + Q("\n"); break;
    case ToolCallFormat::kGigaChat3:  // after the (empty) answer's separator, the call's role
      lead += " (" + Q("<|message_sep|>\n\n") + ")?";
      open += "\n";
      break;
    case ToolCallFormat::kAtem:  // calls after the first are messages of their own
      body = any + (multi ? " (" + Q("<|eom|><|start|>assistant ") + " " + any + ")*" : "");
      open.clear();
      close.clear();
      break;
    case ToolCallFormat::kSeedOss:
      open.clear();
      close.clear();
      break;
    case ToolCallFormat::kHy3:
    case ToolCallFormat::kMiniMaxM3:
    case ToolCallFormat::kDeepSeekV32:
    case ToolCallFormat::kDeepSeekV4: body = Q("\n") + "? " + body + " " + Q("\n") + "?"; break;
    default: break;
  }
  // A template may end the calls with a newline before its end-of-turn.
  return "root ::= " + lead + " " + (open.empty() ? "" : Q(open) + " ") + body +
         (close.empty() ? "" : " " + Q(close)) + " " + Q("\n") + "?\n" + rules;
}

}  // namespace kvs::grammar::internal
