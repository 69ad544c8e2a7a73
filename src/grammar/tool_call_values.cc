// Non-JSON argument values of tool calls (tool_call_values.h): one
// recursive-descent reader for Python and Gemma literals, and the
// MiniMax-M3 XML walk.
#include "grammar/tool_call_values.h"

#include <cstdint>

#include "base/utf8.h"

namespace kvs::grammar::internal {

namespace {

constexpr int kMaxDepth = 64;  // nesting of untrusted model output
const std::string_view kGemmaQuote = "<|\"|>";

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool IsIdent(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// Reads literals from `s` at `pos`; each Read* returns false on a syntax
// error (the caller gives up on the whole value).
class LiteralReader {
 public:
  LiteralReader(std::string_view s, bool gemma) : s_(s), gemma_(gemma) {}

  void SkipWs() {
    while (pos_ < s_.size() && IsWs(s_[pos_])) ++pos_;
  }
  bool AtEnd() {
    SkipWs();
    return pos_ == s_.size();
  }
  bool Eat(char c) {
    SkipWs();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipWs();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  std::string Ident() {
    SkipWs();
    const size_t start = pos_;
    while (pos_ < s_.size() && IsIdent(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  bool ReadValue(ToolJson* out, int depth = 0) {
    if (depth > kMaxDepth) return false;
    SkipWs();
    if (pos_ >= s_.size()) return false;
    if (gemma_ && s_.substr(pos_, kGemmaQuote.size()) == kGemmaQuote) return ReadGemmaString(out);
    const char c = s_[pos_];
    if (c == '{') return ReadDict(out, depth);
    if (c == '[' || c == '(') return ReadList(out, depth);
    if (c == '"' || c == '\'') {
      std::string str;
      if (!ReadQuoted(&str)) return false;
      *out = std::move(str);
      return true;
    }
    return ReadScalar(out);
  }

  // key:value pairs up to '}' (consumed) or the end: Gemma's argument list.
  bool ReadGemmaPairs(ToolJson* out, int depth, bool until_brace) {
    *out = ToolJson::object();
    if (until_brace && Eat('}')) return true;
    if (!until_brace && AtEnd()) return true;
    for (;;) {
      std::string key;
      SkipWs();
      if (s_.substr(pos_, kGemmaQuote.size()) == kGemmaQuote) {
        ToolJson k;
        if (!ReadGemmaString(&k)) return false;
        key = k.get<std::string>();
      } else if (Peek('"') || Peek('\'')) {
        if (!ReadQuoted(&key)) return false;
      } else {
        key = Ident();
        if (key.empty()) return false;
      }
      if (!Eat(':')) return false;
      ToolJson v;
      if (!ReadValue(&v, depth + 1)) return false;
      (*out)[key] = std::move(v);
      if (Eat(',')) {
        if (until_brace && Eat('}')) return true;
        continue;
      }
      if (until_brace) return Eat('}');
      return AtEnd();
    }
  }

  // Gemma's top-level pairs while each is followed by ',' or '}' (which
  // ends the list): a cut or malformed list's complete part.
  ToolJson ReadGemmaPairsPrefix() {
    ToolJson out = ToolJson::object();
    for (;;) {
      if (Eat('}')) return out;
      std::string key;
      SkipWs();
      if (s_.substr(pos_, kGemmaQuote.size()) == kGemmaQuote) {
        ToolJson k;
        if (!ReadGemmaString(&k)) return out;
        key = k.get<std::string>();
      } else if (Peek('"') || Peek('\'')) {
        if (!ReadQuoted(&key)) return out;
      } else {
        key = Ident();
        if (key.empty()) return out;
      }
      ToolJson v;
      if (!Eat(':') || !ReadValue(&v, 1)) return out;
      if (Eat(',')) {
        out[key] = std::move(v);
        continue;
      }
      if (Eat('}')) out[key] = std::move(v);
      return out;
    }
  }

 private:
  bool ReadDict(ToolJson* out, int depth) {
    ++pos_;  // '{'
    if (gemma_) return ReadGemmaPairs(out, depth, /*until_brace=*/true);
    *out = ToolJson::object();
    if (Eat('}')) return true;
    for (;;) {
      ToolJson k;
      if (!ReadValue(&k, depth + 1) || !k.is_string() || !Eat(':')) return false;
      ToolJson v;
      if (!ReadValue(&v, depth + 1)) return false;
      (*out)[k.get<std::string>()] = std::move(v);
      if (Eat(',')) {
        if (Eat('}')) return true;
        continue;
      }
      return Eat('}');
    }
  }
  bool ReadList(ToolJson* out, int depth) {
    const char close = s_[pos_] == '[' ? ']' : ')';
    ++pos_;
    *out = ToolJson::array();
    if (Eat(close)) return true;
    for (;;) {
      ToolJson v;
      if (!ReadValue(&v, depth + 1)) return false;
      out->push_back(std::move(v));
      if (Eat(',')) {
        if (Eat(close)) return true;
        continue;
      }
      return Eat(close);
    }
  }
  bool ReadGemmaString(ToolJson* out) {
    pos_ += kGemmaQuote.size();
    const size_t end = s_.find(kGemmaQuote, pos_);
    if (end == std::string_view::npos) return false;
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + kGemmaQuote.size();
    return true;
  }
  // A Python string literal ('..' or ".."; JSON strings are ".." ones).
  bool ReadQuoted(std::string* out) {
    SkipWs();
    const char q = s_[pos_++];
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == q) return true;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return false;
      const char e = s_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case '0': out->push_back('\0'); break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > s_.size()) return false;
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            const char h = s_[pos_ + i];
            const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return false;
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          pos_ += n;
          // A JSON surrogate pair (\ud83d\ude00) is one character.
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u" && pos_ + 6 <= s_.size()) {
            uint32_t lo = 0;
            bool ok = true;
            for (size_t i = 2; i < 6 && ok; ++i) {
              const char h = s_[pos_ + i];
              const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
              ok = d >= 0;
              lo = lo * 16 + static_cast<uint32_t>(d < 0 ? 0 : d);
            }
            if (ok && lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              pos_ += 6;
            }
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return false;
          AppendUtf8(cp, out);
          break;
        }
        default: out->push_back(e); break;  // \\ \' \" \/ and unknown escapes keep the character
      }
    }
    return false;
  }
  bool ReadScalar(ToolJson* out) {
    const size_t start = pos_;
    while (pos_ < s_.size() && (IsIdent(s_[pos_]) || s_[pos_] == '+')) ++pos_;
    const std::string_view word = s_.substr(start, pos_ - start);
    if (word == "True" || word == "true") {
      *out = true;
    } else if (word == "False" || word == "false") {
      *out = false;
    } else if (word == "None" || word == "null") {
      *out = nullptr;
    } else {
      const ToolJson n = ToolJson::parse(word, nullptr, false);
      if (!n.is_number()) return false;
      *out = n;
    }
    return true;
  }

  std::string_view s_;
  bool gemma_;
  size_t pos_ = 0;
};

std::string Trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \n\t\r");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \n\t\r");
  return std::string(s.substr(a, b - a + 1));
}

}  // namespace

ToolJson ParameterSchema(const ToolJson& tools, std::string_view function, std::string_view param) {
  if (!tools.is_array()) return nullptr;
  for (const ToolJson& t : tools) {
    const ToolJson& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || f["name"] != function) continue;
    if (!f.contains("parameters") || !f["parameters"].is_object()) return nullptr;
    const ToolJson& props = f["parameters"].contains("properties") ? f["parameters"]["properties"] : ToolJson();
    const std::string key(param);
    if (props.is_object() && props.contains(key)) return props[key];
    return nullptr;
  }
  return nullptr;
}

std::string SchemaType(const ToolJson& schema) {
  if (schema.is_object() && schema.contains("type") && schema["type"].is_string()) return schema["type"];
  return "";
}

ToolJson TextValue(std::string_view raw, const ToolJson& schema) {
  if (SchemaType(schema) == "string") return std::string(raw);
  const ToolJson json = ToolJson::parse(raw, nullptr, false);
  if (!json.is_discarded()) return json;
  if (auto py = ParsePythonLiteral(raw)) return *py;
  return std::string(raw);
}

std::optional<ToolJson> ParsePythonLiteral(std::string_view text) {
  LiteralReader r(text, /*gemma=*/false);
  ToolJson v;
  if (!r.ReadValue(&v) || !r.AtEnd()) return std::nullopt;
  return v;
}

std::optional<ToolJson> ParseGemmaArguments(std::string_view text) {
  LiteralReader r(text, /*gemma=*/true);
  ToolJson v;
  if (!r.ReadGemmaPairs(&v, 0, /*until_brace=*/false)) return std::nullopt;
  return v;
}

ToolJson GemmaArgumentsPrefix(std::string_view text) {
  LiteralReader r(text, /*gemma=*/true);
  return r.ReadGemmaPairsPrefix();
}

std::optional<std::vector<std::pair<std::string, ToolJson>>> ParsePythonicCalls(std::string_view text) {
  LiteralReader r(text, /*gemma=*/false);
  std::vector<std::pair<std::string, ToolJson>> calls;
  const bool bracketed = r.Eat('[');
  while (!r.AtEnd() && !r.Peek(']')) {
    std::string name = r.Ident();
    if (name.empty() || !r.Eat('(')) return std::nullopt;
    ToolJson args = ToolJson::object();
    while (!r.Eat(')')) {
      const std::string key = r.Ident();
      ToolJson v;
      if (key.empty() || !r.Eat('=') || !r.ReadValue(&v)) return std::nullopt;
      args[key] = std::move(v);
      if (!r.Eat(',') && !r.Peek(')')) return std::nullopt;
    }
    calls.emplace_back(std::move(name), std::move(args));
    if (!r.Eat(',')) break;
  }
  if (bracketed && !r.Eat(']')) return std::nullopt;
  if (!r.AtEnd() || calls.empty()) return std::nullopt;
  return calls;
}

namespace {

// One level of NS<key>..NS</key> elements; `schema` is the object's (or,
// for arrays, the item's) schema.
std::optional<ToolJson> MiniMaxElements(std::string_view body, std::string_view ns, const ToolJson& schema,
                                        bool array, int depth, bool prefix = false) {
  if (depth > kMaxDepth) return std::nullopt;
  ToolJson out = array ? ToolJson::array() : ToolJson::object();
  // `prefix` (MiniMaxXmlPrefix, top level): a fault ends the level with the
  // elements before it.
  const auto fail = [&]() -> std::optional<ToolJson> {
    if (prefix) return out;
    return std::nullopt;
  };
  size_t pos = 0;
  for (;;) {
    while (pos < body.size() && IsWs(body[pos])) ++pos;
    if (pos == body.size()) return out;
    if (body.substr(pos, ns.size()) != ns || pos + ns.size() >= body.size() || body[pos + ns.size()] != '<') {
      return fail();
    }
    pos += ns.size() + 1;
    const size_t gt = body.find('>', pos);
    if (gt == std::string_view::npos) return fail();
    const std::string key(body.substr(pos, gt - pos));
    const std::string open = std::string(ns) + "<" + key + ">", close = std::string(ns) + "</" + key + ">";
    // The matching close: count nested elements of the same name.
    size_t at = gt + 1, level = 1, end = std::string_view::npos;
    while (level > 0) {
      const size_t o = body.find(open, at), c = body.find(close, at);
      if (c == std::string_view::npos) return fail();
      if (o != std::string_view::npos && o < c) {
        ++level;
        at = o + open.size();
      } else if (--level == 0) {
        end = c;
      } else {
        at = c + close.size();
      }
    }
    const std::string_view inner = body.substr(gt + 1, end - gt - 1);
    pos = end + close.size();
    ToolJson sub;
    if (array) {
      sub = schema;  // the items' schema
    } else if (schema.is_object() && schema.contains("properties") && schema["properties"].is_object() &&
               schema["properties"].contains(key)) {
      sub = schema["properties"][key];
    }
    ToolJson value;
    const std::string type = SchemaType(sub);
    const bool nested = inner.find(std::string(ns) + "<") != std::string_view::npos;
    if ((type == "array" || type == "object") && !nested && !Trim(inner).empty()) {
      value = TextValue(inner, sub);  // written as JSON
    } else if (type == "array" ||
               (type.empty() && nested && inner.find(std::string(ns) + "<item>") != std::string_view::npos)) {
      auto v = MiniMaxElements(inner, ns, sub.is_object() && sub.contains("items") ? sub["items"] : ToolJson(), true,
                               depth + 1);
      if (!v) return fail();
      value = std::move(*v);
    } else if (type == "object" || (type.empty() && nested)) {
      auto v = MiniMaxElements(inner, ns, sub, false, depth + 1);
      if (!v) return fail();
      value = std::move(*v);
    } else {
      value = TextValue(inner, sub);
    }
    if (array) {
      out.push_back(std::move(value));
    } else {
      out[key] = std::move(value);
    }
  }
}

}  // namespace

std::optional<ToolJson> ParseMiniMaxXml(std::string_view body, std::string_view ns, const ToolJson& schema) {
  return MiniMaxElements(Trim(body), ns, schema, /*array=*/false, 0);
}

ToolJson MiniMaxXmlPrefix(std::string_view body, std::string_view ns, const ToolJson& schema) {
  return *MiniMaxElements(Trim(body), ns, schema, /*array=*/false, 0, /*prefix=*/true);
}

}  // namespace kvs::grammar::internal
