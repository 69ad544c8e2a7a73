#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "tokenizer/unicode.h"

namespace kvs::tok {

namespace {

// Unicode White_Space, which Oniguruma's \s matches (PCRE2's \s with UCP
// misses U+0085).
constexpr std::string_view kSpaceClassBody = "\\t-\\r\\x{85}\\p{Z}";
// Oniguruma's \w: Letter | Mark | Decimal_Number | Connector_Punctuation.
constexpr std::string_view kWordClassBody = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

pcre2_code* AsCode(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

std::string TranslateOnigToPcre2(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  int class_depth = 0;  // inside [...]
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      const bool in_class = class_depth > 0;
      switch (e) {
        case 's':
          if (in_class) out.append(kSpaceClassBody);
          else out.append("[").append(kSpaceClassBody).append("]");
          continue;
        case 'S':
          if (!in_class) { out.append("[^").append(kSpaceClassBody).append("]"); continue; }
          break;
        case 'w':
          if (in_class) out.append(kWordClassBody);
          else out.append("[").append(kWordClassBody).append("]");
          continue;
        case 'W':
          if (!in_class) { out.append("[^").append(kWordClassBody).append("]"); continue; }
          break;
        case 'h':  // Oniguruma: hex digit (PCRE2: horizontal space)
          if (in_class) out.append("0-9a-fA-F");
          else out.append("[0-9a-fA-F]");
          continue;
        case 'H':
          if (!in_class) { out.append("[^0-9a-fA-F]"); continue; }
          break;
        default:
          break;
      }
      out.push_back('\\');
      out.push_back(e);
      continue;
    }
    if (c == '[') {
      // "[" opens a class (or a nested one inside a class); a leading "]" or
      // "^]" is literal and must not close it.
      ++class_depth;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') { out.push_back('^'); ++i; }
      if (i + 1 < p.size() && p[i + 1] == ']') { out.append("\\]"); ++i; }
      continue;
    }
    if (c == ']' && class_depth > 0) {
      --class_depth;
      out.push_back(c);
      continue;
    }
    out.push_back(c);
  }
  return out;
}

StatusOr<std::shared_ptr<const Regex>> Regex::Compile(const std::string& onig_pattern) {
  const std::string pcre = TranslateOnigToPcre2(onig_pattern);
  pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre.data()), pcre.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_off, cctx);
  pcre2_compile_context_free(cctx);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return InvalidArgument("bad tokenizer regex '{}' at offset {}: {}", onig_pattern,
                           static_cast<size_t>(err_off), reinterpret_cast<const char*>(msg));
  }
  // JIT is an optimisation only; the interpreter is used when it is absent.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::shared_ptr<Regex> r(new Regex());
  r->pattern_ = onig_pattern;
  r->code_ = code;
  return std::shared_ptr<const Regex>(std::move(r));
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(AsCode(code_));
}

Regex::Matcher::Matcher(const Regex& re, std::string_view text) : re_(re), text_(text) {
  md_ = pcre2_match_data_create_from_pattern(AsCode(re.code_), nullptr);
  KVS_CHECK(md_ != nullptr);
}

Regex::Matcher::~Matcher() { pcre2_match_data_free(static_cast<pcre2_match_data*>(md_)); }

bool Regex::Matcher::Next(size_t* begin, size_t* end) {
  auto* md = static_cast<pcre2_match_data*>(md_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
  while (pos_ <= text_.size()) {
    // The caller guarantees well-formed UTF-8, so skip PCRE2's O(n) check,
    // which would otherwise run on every call and make this quadratic.
    int rc = pcre2_match(AsCode(re_.code_), subject, text_.size(), pos_, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(AsCode(re_.code_), subject, text_.size(), pos_, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                       nullptr);
    }
    // No match, or a resource limit: the rest of the text stays one gap.
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0];
    const size_t e = ov[1];
    if (e > b) {
      pos_ = e;
      *begin = b;
      *end = e;
      return true;
    }
    // Empty match: step over one code point.
    if (b >= text_.size()) break;
    uint32_t cp;
    const size_t len = Utf8Next(text_, b, &cp);
    pos_ = b + (len == 0 ? 1 : len);
  }
  pos_ = text_.size() + 1;
  return false;
}

void Regex::FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const {
  Matcher m(*this, text);
  size_t b, e;
  while (m.Next(&b, &e)) out->emplace_back(b, e);
}

namespace {

using Span = TextPipeline::Span;

// Applies an HF-style split to the word buf[w.b, w.e), appending the
// resulting words (absolute offsets into buf) to *out. Matches are consumed
// as they are found: a 1 MB fragment is one word before the first split.
void SplitSpan(std::string_view buf, Span w, const Regex& re, SplitBehavior behavior, bool invert,
               std::vector<Span>* out) {
  auto emit = [&](size_t b, size_t e) {
    if (e > b) out->push_back({b, e});
  };
  // State across pieces: `cur` is where the pending output word starts
  // (merged behaviors), `run` the start of a run of delimiters (contiguous).
  size_t cur = w.b;
  size_t run = SIZE_MAX;
  auto piece = [&](size_t b, size_t e, bool delim) {
    switch (behavior) {
      case SplitBehavior::kIsolated:
        emit(b, e);
        break;
      case SplitBehavior::kRemoved:
        if (!delim) emit(b, e);
        break;
      case SplitBehavior::kMergedWithPrevious:
        // A delimiter ends the word before it (or stands alone after another).
        if (delim) { emit(cur, e); cur = e; }
        break;
      case SplitBehavior::kMergedWithNext:
        // A delimiter starts a word (the one before it, if any, ends).
        if (delim && b > cur) { emit(cur, b); cur = b; }
        break;
      case SplitBehavior::kContiguous:
        if (delim) {
          if (run == SIZE_MAX) run = b;
        } else {
          if (run != SIZE_MAX) { emit(run, b); run = SIZE_MAX; }
          emit(b, e);
        }
        break;
    }
  };
  // Malformed bytes are cut out first: each is its own word (flushing any
  // pending state), the regex only sees well-formed runs.
  auto flush = [&](size_t at) {
    if (behavior == SplitBehavior::kMergedWithPrevious || behavior == SplitBehavior::kMergedWithNext) {
      emit(cur, at);
    } else if (behavior == SplitBehavior::kContiguous && run != SIZE_MAX) {
      emit(run, at);
      run = SIZE_MAX;
    }
  };
  size_t start = w.b;
  while (start < w.e) {
    const std::string_view rest = buf.substr(start, w.e - start);
    const size_t valid = Utf8ValidPrefix(rest);
    if (valid == 0) {
      out->push_back({start, start + 1});
      ++start;
      cur = start;
      continue;
    }
    Regex::Matcher m(re, rest.substr(0, valid));
    size_t prev = 0, b, e;
    while (m.Next(&b, &e)) {
      if (b > prev) piece(start + prev, start + b, invert);
      piece(start + b, start + e, !invert);
      prev = e;
    }
    if (prev < valid) piece(start + prev, start + valid, invert);
    start += valid;
    flush(start);
    cur = start;
  }
}

}  // namespace

bool TextPipeline::byte_level() const {
  for (const auto& s : pre_) {
    if (s.kind == PreTokenizerStep::Kind::kByteLevel) return true;
  }
  return false;
}

void TextPipeline::Run(std::string_view fragment, bool at_input_start, std::string* buf,
                       std::vector<Span>* words) const {
  buf->assign(fragment);
  for (const NormalizerStep& n : normalizer_) {
    if (n.kind == NormalizerStep::Kind::kPrepend) {
      if (!buf->empty()) buf->insert(0, n.a);
    } else if (buf->find(n.a) != std::string::npos) {
      *buf = ReplaceAll(*buf, n.a, n.b);
    }
  }
  words->clear();
  if (buf->empty()) return;
  std::vector<Span> cur{{0, buf->size()}};
  std::vector<Span> next;
  next.reserve(buf->size() / 4 + 8);
  std::string out;  // the rewritten text of a transforming step
  for (const PreTokenizerStep& step : pre_) {
    next.clear();
    switch (step.kind) {
      case PreTokenizerStep::Kind::kSplit:
        for (Span w : cur) SplitSpan(*buf, w, *step.regex, step.behavior, step.invert, &next);
        break;
      case PreTokenizerStep::Kind::kByteLevel: {
        if (step.add_prefix_space) {
          // A space goes in front of every word that lacks one, before the
          // regex sees it.
          out.clear();
          for (Span& w : cur) {
            const size_t b = out.size();
            if ((*buf)[w.b] != ' ') out.push_back(' ');
            out.append(*buf, w.b, w.e - w.b);
            w = {b, out.size()};
          }
          buf->swap(out);
        }
        std::vector<Span> pieces;
        pieces.reserve(step.regex ? buf->size() / 4 + 8 : cur.size());
        if (step.regex) {
          for (Span w : cur) SplitSpan(*buf, w, *step.regex, SplitBehavior::kIsolated, false, &pieces);
        } else {
          pieces = cur;
        }
        out.clear();
        out.reserve(buf->size() * 2);
        for (Span p : pieces) {
          const size_t b = out.size();
          AppendByteLevel(std::string_view(*buf).substr(p.b, p.e - p.b), &out);
          next.push_back({b, out.size()});
        }
        buf->swap(out);
        break;
      }
      case PreTokenizerStep::Kind::kMetaspace: {
        out.clear();
        const std::string& rep = step.replacement;
        for (size_t i = 0; i < cur.size(); ++i) {
          const std::string w = ReplaceAll(std::string_view(*buf).substr(cur[i].b, cur[i].e - cur[i].b), " ", rep);
          const bool starts = w.compare(0, rep.size(), rep) == 0;
          const bool want = step.prepend == PrependScheme::kAlways ||
                            (step.prepend == PrependScheme::kFirst && at_input_start && i == 0);
          const size_t b = out.size();
          if (want && !starts) out += rep;
          out += w;
          if (!step.split) {
            next.push_back({b, out.size()});
            continue;
          }
          // Cut before every replacement character (merged with what follows).
          size_t piece = b;
          for (size_t pos = out.find(rep, b + 1); pos != std::string::npos; pos = out.find(rep, pos + rep.size())) {
            next.push_back({piece, pos});
            piece = pos;
          }
          next.push_back({piece, out.size()});
        }
        buf->swap(out);
        break;
      }
    }
    cur.swap(next);
  }
  for (Span w : cur) {
    if (w.e > w.b) words->push_back(w);
  }
}

const char* const kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekkenPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt4oPattern =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// CJK ideographs, the blocks before them, and Hangul (DeepSeek's split).
constexpr const char* kDeepseekCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
// Cased letters as DeepSeek-LLM's tokenizer.json enumerates them.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
constexpr const char* kBloomPattern =
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";

bool In(std::string_view name, std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> PreTokenizerPatterns(std::string_view pre, bool* known) {
  *known = true;
  if (In(pre, {"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "jina-es", "jina-de", "gigachat", "jina-v1-en",
               "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe"})) {
    return {kGpt2Pattern};
  }
  if (In(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe"})) {
    return {kLlama3Pattern};
  }
  if (In(pre, {"qwen2", "stablelm2", "megrez"})) return {kQwen2Pattern};
  if (In(pre, {"gpt-4o", "llama4"})) return {kGpt4oPattern};
  if (pre == "tekken") return {kTekkenPattern};
  if (pre == "deepseek-llm") {
    return {"[\\r\\n]", kDeepseekLetters,
            "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
            "\\s+$", kDeepseekCjk, "\\p{N}+"};
  }
  if (pre == "deepseek-coder") {
    return {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"};
  }
  if (pre == "deepseek-v3") {
    return {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
            " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
  }
  if (pre == "falcon") {
    return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Pattern, "[0-9][0-9][0-9]"};
  }
  if (In(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    return {"\\p{N}", kGpt2Pattern};
  }
  if (In(pre, {"poro-chat", "bloom", "gpt3-finnish"})) return {kBloomPattern};
  if (pre == "viking") return {kBloomPattern, "\\p{N}"};
  if (pre == "default" || pre.empty()) {
    return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Pattern, "\\p{N}+", "[0-9][0-9][0-9]"};
  }
  *known = false;
  return {kGpt2Pattern};
}

}  // namespace kvs::tok
