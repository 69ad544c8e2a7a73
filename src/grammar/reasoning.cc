// Reasoning sections (reasoning.h): formats, where a reply starts, the
// stream parser and the grammar wrapper.
#include "grammar/reasoning.h"

#include <algorithm>

#include "grammar/tool_call_scan.h"

namespace kvs::grammar {

namespace {

struct KnownReasoningFormat {
  const char* name;
  const char* start;
  const char* end;
  bool harmony;
  std::vector<std::string> markers;  // the delimiters' single-token pieces
};

const std::vector<KnownReasoningFormat>& KnownReasoningFormats() {
  static const std::vector<KnownReasoningFormat> k = {
      {"think", "<think>", "</think>", false, {"<think>", "</think>"}},
      {"seed_oss", "<seed:think>", "</seed:think>", false, {"<seed:think>", "</seed:think>"}},
      {"minimax", "<mm:think>", "</mm:think>", false, {"<mm:think>", "</mm:think>"}},
      {"mistral", "[THINK]", "[/THINK]", false, {"[THINK]", "[/THINK]"}},
      {"command", "<|START_THINKING|>", "<|END_THINKING|>", false, {"<|START_THINKING|>", "<|END_THINKING|>"}},
      {"gemma4", "<|channel>thought", "<channel|>", false, {"<|channel>", "<channel|>"}},
      {"harmony", "<|channel|>analysis<|message|>", "<|end|>", true,
       {"<|start|>", "<|channel|>", "<|message|>", "<|end|>"}},
  };
  return k;
}

ReasoningFormat MakeReasoningFormat(const KnownReasoningFormat& k) { return {k.name, k.start, k.end, k.harmony}; }

const KnownReasoningFormat* FindReasoningFormat(std::string_view name) {
  for (const KnownReasoningFormat& k : KnownReasoningFormats()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

bool TemplateHas(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }
bool IsReasoningSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
constexpr const char* kReasoningSpace = " \n\t\r";

// Harmony: the header of a further analysis message after <|end|>.
const std::string kHarmonyNextAnalysis = "<|start|>assistant<|channel|>analysis<|message|>";
const std::string kHarmonyFinalHeader = "<|channel|>final<|message|>";

}  // namespace

ReasoningFormat DetectReasoningFormat(std::string_view t) {
  // Most specific first: "<think>" is not a substring of "<seed:think>",
  // but templates of one family may mention another's tags in prose.
  if (TemplateHas(t, "<|channel|>") && TemplateHas(t, "analysis")) {
    return MakeReasoningFormat(*FindReasoningFormat("harmony"));
  }
  for (const char* name : {"seed_oss", "minimax", "mistral", "command", "think"}) {
    const KnownReasoningFormat& k = *FindReasoningFormat(name);
    if (TemplateHas(t, k.start) && TemplateHas(t, k.end)) return MakeReasoningFormat(k);
  }
  if (TemplateHas(t, "<|channel>") && TemplateHas(t, "<channel|>") && TemplateHas(t, "thought")) {
    return MakeReasoningFormat(*FindReasoningFormat("gemma4"));
  }
  return {};
}

StatusOr<ReasoningFormat> ReasoningFormatByName(std::string_view name) {
  if (name == "none") return ReasoningFormat{};
  if (const KnownReasoningFormat* k = FindReasoningFormat(name)) return MakeReasoningFormat(*k);
  // vLLM's --reasoning-parser names of models that think in <think> tags.
  static const char* kThinkAliases[] = {"deepseek_r1", "deepseek_v3", "qwen3", "glm45", "kimi_k2", "step3",
                                        "minimax_m2", "ernie45", "hunyuan_a13b", "granite"};
  for (const char* alias : kThinkAliases) {
    if (name == alias) return MakeReasoningFormat(*FindReasoningFormat("think"));
  }
  if (name == "gpt_oss" || name == "openai_gptoss") return MakeReasoningFormat(*FindReasoningFormat("harmony"));
  return NotFound("unknown reasoning parser '{}'", name);
}

const std::vector<std::string>& ReasoningFormatNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const KnownReasoningFormat& k : KnownReasoningFormats()) v.emplace_back(k.name);
    return v;
  }();
  return names;
}

std::vector<std::string> ReasoningMarkers(const ReasoningFormat& format) {
  if (const KnownReasoningFormat* k = FindReasoningFormat(format.name)) return k->markers;
  if (!format.enabled()) return {};
  return {format.start, format.end};
}

std::vector<std::pair<int32_t, std::string>> DroppedMarkerTokens(const tok::Tokenizer& tokenizer,
                                                                 const std::vector<std::string>& markers) {
  std::vector<std::pair<int32_t, std::string>> out;
  for (const std::string& m : markers) {
    const int32_t id = tokenizer.FindToken(m);
    if (id < 0) continue;
    const int32_t ids[] = {id};
    // Only what the content decoder drops: a marker that decodes as itself
    // (a user-defined token, e.g. Qwen's <think>) already reaches the parsers.
    if (tokenizer.Decode(ids, /*skip_special=*/true).empty()) out.emplace_back(id, tokenizer.TokenPiece(id));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

ReasoningStart ReasoningStartOf(const ReasoningFormat& format, std::string_view prompt) {
  if (!format.enabled()) return ReasoningStart::kContent;
  size_t n = prompt.size();
  while (n > 0 && IsReasoningSpace(prompt[n - 1])) --n;
  const std::string_view p = prompt.substr(0, n);
  if (p.ends_with(format.start)) return ReasoningStart::kInside;
  // An empty section closed by the template: thinking is off.
  if (p.ends_with(format.end)) return ReasoningStart::kContent;
  return ReasoningStart::kMaybe;
}

const char* ReasoningStartName(ReasoningStart start) {
  switch (start) {
    case ReasoningStart::kContent: return "content";
    case ReasoningStart::kMaybe: return "maybe";
    case ReasoningStart::kInside: return "inside";
  }
  return "content";
}

// --- stream parser ---------------------------------------------------------

ReasoningStreamParser::ReasoningStreamParser(ReasoningFormat format, ReasoningStart start)
    : format_(std::move(format)), state_(State::kContent) {
  if (!format_.enabled() || start == ReasoningStart::kContent) return;
  state_ = start == ReasoningStart::kInside ? State::kInside : State::kMaybe;
  saw_reasoning_ = start == ReasoningStart::kInside;
}

int ReasoningStreamParser::MatchStart(const std::vector<std::string>& starts, bool final) {
  const size_t first = buf_.find_first_not_of(kReasoningSpace);
  if (first == std::string::npos) return final ? 0 : -1;  // only whitespace so far
  const std::string_view rest = std::string_view(buf_).substr(first);
  bool undecided = false;
  for (const std::string& s : starts) {
    if (rest.starts_with(s)) {
      buf_.erase(0, first + s.size());
      return 1;
    }
    if (!final && rest.size() < s.size() && std::string_view(s).starts_with(rest)) undecided = true;
  }
  return undecided ? -1 : 0;
}

void ReasoningStreamParser::EmitReasoning(std::string_view text) {
  if (text.empty()) return;
  if (need_separator_ && released_reasoning_) out_.reasoning += "\n";
  need_separator_ = false;
  out_.reasoning += text;
  section_has_text_ = true;
  released_reasoning_ = true;
}

void ReasoningStreamParser::Process(bool final) {
  for (;;) {
    switch (state_) {
      case State::kContent:
        out_.content += buf_;
        buf_.clear();
        return;
      case State::kMaybe: {
        std::vector<std::string> starts = {format_.start};
        if (format_.harmony) starts.push_back("<|start|>assistant" + format_.start);
        const int m = MatchStart(starts, final);
        if (m < 0) return;
        state_ = m == 0 ? State::kContent : State::kInside;
        saw_reasoning_ = saw_reasoning_ || m == 1;
        section_has_text_ = false;
        continue;
      }
      case State::kInside: {
        if (!section_has_text_) {  // leading whitespace of the reasoning is dropped
          const size_t first = buf_.find_first_not_of(kReasoningSpace);
          buf_.erase(0, first == std::string::npos ? buf_.size() : first);
          if (buf_.empty()) return;
        }
        const size_t at = buf_.find(format_.end);
        const size_t upto = at != std::string::npos ? at
                            : final                 ? buf_.size()
                                                    : internal::SafePrefixLength(buf_, {format_.end});
        // Trailing whitespace waits: dropped if the section ends right after it.
        size_t keep = upto;
        while (keep > 0 && IsReasoningSpace(buf_[keep - 1])) --keep;
        EmitReasoning(std::string_view(buf_).substr(0, keep));
        if (at == std::string::npos) {
          buf_.erase(0, final ? buf_.size() : keep);
          return;
        }
        buf_.erase(0, at + format_.end.size());
        state_ = State::kAfterEnd;
        continue;
      }
      case State::kAfterEnd: {
        if (format_.harmony) {
          // Another analysis message continues the reasoning; anything else
          // (the final channel, a tool call) is content, headers included.
          const int m = MatchStart({kHarmonyNextAnalysis}, final);
          if (m < 0) return;
          state_ = m == 0 ? State::kContent : State::kInside;
          need_separator_ = m == 1;
          section_has_text_ = false;
          continue;
        }
        const size_t first = buf_.find_first_not_of(kReasoningSpace);
        if (first == std::string::npos) {
          buf_.clear();
          return;
        }
        buf_.erase(0, first);
        state_ = State::kContent;
        continue;
      }
    }
  }
}

ReasoningDelta ReasoningStreamParser::Feed(std::string_view text) {
  buf_ += text;
  Process(/*final=*/false);
  return std::exchange(out_, {});
}

ReasoningDelta ReasoningStreamParser::Finish() {
  Process(/*final=*/true);
  buf_.clear();
  return std::exchange(out_, {});
}

ReasoningDelta ParseReasoning(const ReasoningFormat& format, ReasoningStart start, std::string_view text) {
  ReasoningStreamParser p(format, start);
  ReasoningDelta all = p.Feed(text);
  ReasoningDelta rest = p.Finish();
  all.reasoning += rest.reasoning;
  all.content += rest.content;
  return all;
}

// --- grammar ---------------------------------------------------------------

namespace {

// Text (valid UTF-8) that does not contain `e`, as one regular expression.
// e's first byte must be ASCII and occur nowhere else in e (true of every
// format's end tag): then after a mismatch the only partial match left is a
// fresh first byte, and the language is
//   ( [^e0] | e0 L* Q )* ( e0 L* P )?
// where, over k = 1 .. |e|-1, L = e[1..k) e0 (a fresh start), Q = e[1..k)
// [^e0 e_k] (a mismatch: nothing matched), P = e[1..k) (a partial match at
// the end, completed by the e that follows).
StatusOr<int32_t> TextWithout(Grammar* g, const std::string& e) {
  bool ok = e.size() >= 2;
  for (size_t i = 0; i < e.size(); ++i) ok = ok && static_cast<unsigned char>(e[i]) < 0x80 && (i == 0 || e[i] != e[0]);
  if (!ok) return InvalidArgument("reasoning end tag '{}' cannot be excluded by the grammar wrapper", e);
  const auto e0 = static_cast<uint32_t>(static_cast<unsigned char>(e[0]));
  auto prefix = [&](size_t k) { return k == 1 ? g->Empty() : g->Literal(e.substr(1, k - 1)); };
  std::vector<int32_t> l, q, p;
  for (size_t k = 1; k < e.size(); ++k) {
    const auto ek = static_cast<uint32_t>(static_cast<unsigned char>(e[k]));
    l.push_back(g->Sequence({prefix(k), g->Literal(e.substr(0, 1))}));
    q.push_back(g->Sequence({prefix(k), g->Class({{e0, e0}, {ek, ek}}, /*negated=*/true)}));
    p.push_back(prefix(k));
  }
  const int32_t fresh = g->Star(g->Choice(l));
  const int32_t segment = g->Choice({g->Class({{e0, e0}}, /*negated=*/true),
                                     g->Sequence({g->Literal(e.substr(0, 1)), fresh, g->Choice(q)})});
  const int32_t tail = g->Optional(g->Sequence({g->Literal(e.substr(0, 1)), fresh, g->Choice(p)}));
  return g->Sequence({g->Star(segment), tail});
}

}  // namespace

StatusOr<Grammar> WithReasoningSection(const Grammar& g, const ReasoningFormat& format, ReasoningStart start,
                                       bool tool_call) {
  if (!format.enabled() || start == ReasoningStart::kContent) return g;
  Grammar out = g;
  const int32_t old_root = out.root();
  if (old_root < 0) return InvalidArgument("the grammar has no root rule");
  const std::string content = out.RenameRule(old_root, "content");
  KVS_ASSIGN_OR_RETURN(const int32_t body, TextWithout(&out, format.end));
  int32_t prefix = -1;
  if (format.harmony) {
    // Analysis messages, each "<|channel|>analysis<|message|>...<|end|>"
    // and the next message's "<|start|>assistant"; then the final channel
    // (a forced call writes its own commentary header).
    const int32_t rest = out.Sequence({body, out.Literal(format.end), out.Literal("<|start|>assistant")});
    const int32_t more = out.Star(out.Sequence({out.Literal(format.start), rest}));
    prefix = start == ReasoningStart::kInside ? out.Sequence({rest, more}) : more;
    if (!tool_call) prefix = out.Sequence({prefix, out.Literal(kHarmonyFinalHeader)});
  } else {
    const int32_t ws = out.Star(out.Class({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}));
    const int32_t section = out.Sequence({body, out.Literal(format.end), ws});
    prefix = start == ReasoningStart::kInside ? section
                                              : out.Optional(out.Sequence({ws, out.Literal(format.start), section}));
  }
  const int32_t root = out.RuleId("root");
  out.SetBody(root, out.Sequence({prefix, out.Ref(out.FindRule(content))}));
  KVS_RETURN_IF_ERROR(out.Validate());
  return out;
}

}  // namespace kvs::grammar
