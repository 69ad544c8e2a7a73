#include "gateway/context_policy.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

namespace kvs::gateway {

namespace {

using api::Json;

// Invisible characters a client may hide instructions or noise in. Zero-width
// (non-)joiners (U+200C, U+200D) stay: Persian, Indic scripts and emoji
// sequences need them, and variation selectors choose emoji presentation.
bool Removed(uint32_t cp) {
  if (cp < 0x20) return cp != '\t' && cp != '\n' && cp != '\r';
  if (cp >= 0x7F && cp <= 0x9F) return true;  // DEL, C1 controls
  switch (cp) {
    case 0x00AD:  // soft hyphen
    case 0x180E:  // Mongolian vowel separator
    case 0x200B:  // zero-width space
    case 0x200E:  // left-to-right mark
    case 0x200F:  // right-to-left mark
    case 0xFEFF:  // byte-order mark / zero-width no-break space
      return true;
    default: break;
  }
  return (cp >= 0x202A && cp <= 0x202E)      // bidi embeddings and overrides
         || (cp >= 0x2060 && cp <= 0x2064)   // word joiner, invisible operators
         || (cp >= 0x2066 && cp <= 0x2069)   // bidi isolates
         || (cp >= 0xFFF9 && cp <= 0xFFFB)   // interlinear annotation
         || (cp >= 0xE0000 && cp <= 0xE007F);  // tag characters ("ASCII smuggling")
}

// The client-written texts in a value: the string itself, or inside an
// array / object the members that hold text in every dialect (content,
// text, output) and array items; roles, ids, names and tool arguments are
// not texts. What clean_content cleans and truncate_middle may cut.
void CollectTexts(Json* v, std::vector<std::string*>* out) {
  if (v->is_string()) {
    out->push_back(v->get_ptr<std::string*>());
  } else if (v->is_array()) {
    for (Json& item : *v) CollectTexts(&item, out);
  } else if (v->is_object()) {
    for (const char* key : {"content", "text", "output"}) {
      auto it = v->find(key);
      if (it != v->end()) CollectTexts(&*it, out);
    }
  }
}

bool ChatLike(api::Endpoint endpoint) { return endpoint == api::Endpoint::kChatCompletions; }

// The list of turns a chat-like request holds (nullptr: none).
Json* Turns(api::Dialect dialect, Json* body) {
  const char* key = dialect == api::Dialect::kResponses ? "input" : "messages";
  auto it = body->find(key);
  return it != body->end() && it->is_array() ? &*it : nullptr;
}

std::string Role(const Json& item) {
  if (!item.is_object()) return "";
  auto it = item.find("role");
  return it != item.end() && it->is_string() ? it->get<std::string>() : "";
}

bool SystemLike(const Json& item) {
  const std::string r = Role(item);
  return r == "system" || r == "developer";
}

std::optional<api::ApiError> Recount(const PromptCounter& counter, api::Endpoint endpoint, api::Dialect dialect,
                                     const Json& body, CountedRequest* counted) {
  CountedRequest fresh;
  if (auto e = counter.Count(endpoint, body, &fresh, dialect)) return e;
  *counted = std::move(fresh);
  return std::nullopt;
}

api::ApiError CannotFit(const std::string& param, const std::string& why, int64_t tokens, int64_t budget) {
  api::ApiError e = api::BadRequest(
      fmt::format("the prompt does not fit the longest context served here ({} prompt tokens allowed): {}", budget, why),
      param, "context_length_exceeded");
  e.extra["prompt_tokens"] = tokens;
  e.extra["max_prompt_tokens"] = budget;
  return e;
}

std::optional<api::ApiError> DropOldestTurns(const PromptCounter& counter, api::Endpoint endpoint, api::Dialect dialect,
                                             int64_t budget, Json* body, CountedRequest* counted, Fitted* fitted) {
  const std::string param = dialect == api::Dialect::kResponses ? "input" : "messages";
  Json* turns = ChatLike(endpoint) ? Turns(dialect, body) : nullptr;
  if (!turns) {
    return CannotFit(dialect == api::Dialect::kResponses ? "input" : "prompt",
                     "truncate_oldest_turns drops turns of a conversation, and this request has none",
                     counted->max_prompt_tokens, budget);
  }
  // Positions (among the non-system turns) where the kept conversation may
  // start: a user turn, never the first (that drops nothing) and up to the
  // last turn, which always stays.
  std::vector<size_t> others;
  for (size_t i = 0; i < turns->size(); ++i) {
    if (!SystemLike((*turns)[i])) others.push_back(i);
  }
  std::vector<size_t> starts;
  for (size_t k = 1; k < others.size(); ++k) {
    if (Role((*turns)[others[k]]) == "user") starts.push_back(k);
  }
  auto without_first = [&](size_t k) {
    Json kept = Json::array();
    size_t next_other = 0;
    for (size_t i = 0; i < turns->size(); ++i) {
      const bool other = next_other < others.size() && others[next_other] == i;
      if (other && next_other++ < k) continue;
      kept.push_back((*turns)[i]);
    }
    Json b = *body;
    b[param] = std::move(kept);
    return b;
  };
  // The fewest dropped turns that fit: counts only fall as more are dropped,
  // so a binary search over the start positions.
  size_t lo = 0, hi = starts.size();  // the answer is in [lo, hi); hi: none fits
  CountedRequest best;
  Json best_body;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    Json b = without_first(starts[mid]);
    CountedRequest c;
    if (auto e = Recount(counter, endpoint, dialect, b, &c)) return e;
    if (c.max_prompt_tokens <= budget) {
      hi = mid;
      best = std::move(c);
      best_body = std::move(b);
    } else {
      lo = mid + 1;
    }
  }
  if (best_body.is_null()) {
    if (starts.empty()) {
      return CannotFit(param, "truncate_oldest_turns keeps the system messages and the latest user turn, and they "
                       "alone are too long", counted->max_prompt_tokens, budget);
    }
    Json b = without_first(starts.back());
    CountedRequest c;
    if (auto e = Recount(counter, endpoint, dialect, b, &c)) return e;
    return CannotFit(param, fmt::format("with every turn before the latest user turn dropped it is still {} tokens",
                                        c.max_prompt_tokens), counted->max_prompt_tokens, budget);
  }
  fitted->dropped_messages = static_cast<int64_t>(starts[hi]);
  *body = std::move(best_body);
  *counted = std::move(best);
  return std::nullopt;
}

// text without `drop` of its n tokens (ids: its tokens as text), keeping the
// head and tail halves of the rest; cut on token boundaries moved to whole
// UTF-8 characters.
std::string CutMiddle(const tok::Tokenizer& tok, const std::string& text, const std::vector<int32_t>& ids, size_t keep) {
  // Byte offsets of the token boundaries. A SentencePiece vocabulary adds a
  // space before the text: the pieces are then one byte longer.
  std::vector<size_t> at{0};
  for (int32_t id : ids) at.push_back(at.back() + tok.TokenPiece(id).size());
  const size_t total = at.back();
  const size_t shift = total == text.size() + 1 ? 1 : 0;
  const bool exact = total == text.size() + shift;
  auto offset = [&](size_t token) {
    if (!exact) return text.size() * token / std::max<size_t>(ids.size(), 1);  // proportional: pieces do not add up
    return at[token] >= shift ? at[token] - shift : 0;
  };
  const size_t head_tokens = keep / 2, tail_tokens = keep - head_tokens;
  size_t head_end = std::min(offset(head_tokens), text.size());
  size_t tail_start = std::max(offset(ids.size() - tail_tokens), head_end);
  auto continuation = [&](size_t i) { return i < text.size() && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80; };
  while (head_end > 0 && continuation(head_end)) --head_end;
  while (continuation(tail_start)) ++tail_start;
  return text.substr(0, head_end) + text.substr(tail_start);
}

std::optional<api::ApiError> CutLongestText(const PromptCounter& counter, api::Endpoint endpoint, api::Dialect dialect,
                                            int64_t budget, Json* body, CountedRequest* counted) {
  std::vector<std::string*> texts;
  std::string param;
  if (!ChatLike(endpoint)) {
    param = "prompt";
    Json* prompt = &(*body)["prompt"];
    if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_array()) prompt = &(*prompt)[0];  // [[ids]]
    Json& p = *prompt;
    if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      texts.push_back(p[0].get_ptr<std::string*>());
    } else if (p.is_string()) {
      texts.push_back(p.get_ptr<std::string*>());
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      // Token ids: cut them directly.
      const int64_t excess = counted->max_prompt_tokens - budget;
      const int64_t n = static_cast<int64_t>(p.size());
      if (n - excess < 2) {
        return CannotFit(param, "truncate_middle would leave fewer than 2 tokens", counted->max_prompt_tokens, budget);
      }
      const int64_t keep = n - excess, head = keep / 2;
      Json cut = Json::array();
      for (int64_t i = 0; i < n; ++i) {
        if (i < head || i >= n - (keep - head)) cut.push_back(p[static_cast<size_t>(i)]);
      }
      p = std::move(cut);
      return Recount(counter, endpoint, dialect, *body, counted);
    } else {
      return CannotFit(param, "truncate_middle cuts one prompt, and this request has several",
                       counted->max_prompt_tokens, budget);
    }
  } else {
    param = dialect == api::Dialect::kResponses ? "input" : "messages";
    if (Json* turns = Turns(dialect, body)) {
      for (Json& t : *turns) {
        if (!SystemLike(t)) CollectTexts(&t, &texts);
      }
    } else if (dialect == api::Dialect::kResponses && body->contains("input") && (*body)["input"].is_string()) {
      texts.push_back((*body)["input"].get_ptr<std::string*>());
    }
  }
  if (texts.empty()) {
    return CannotFit(param, "truncate_middle found no text to cut", counted->max_prompt_tokens, budget);
  }
  std::string* longest = *std::max_element(texts.begin(), texts.end(),
                                            [](const std::string* a, const std::string* b) { return a->size() < b->size(); });
  const tok::Tokenizer& tok = counter.tokenizer();
  // The text's tokens alone need not add up to the prompt's around the cut
  // (merges across the junction): a margin, grown on each pass.
  for (int pass = 0; pass < 4 && counted->max_prompt_tokens > budget; ++pass) {
    const std::vector<int32_t> ids = tok.Encode(*longest, /*add_special=*/false, /*parse_special=*/false);
    const int64_t excess = counted->max_prompt_tokens - budget + 2 * pass;
    const int64_t keep = static_cast<int64_t>(ids.size()) - excess;
    if (keep < 2) {
      return CannotFit(param, fmt::format("the longest text is {} tokens, and removing {} of them would leave fewer than 2",
                                          ids.size(), excess), counted->max_prompt_tokens, budget);
    }
    *longest = CutMiddle(tok, *longest, ids, static_cast<size_t>(keep));
    if (auto e = Recount(counter, endpoint, dialect, *body, counted)) return e;
  }
  if (counted->max_prompt_tokens > budget) {
    return CannotFit(param, "truncate_middle did not converge", counted->max_prompt_tokens, budget);
  }
  return std::nullopt;
}

}  // namespace

OverflowPolicy ParseOverflowPolicy(std::string_view name) {
  if (name == kOverflowTruncateOldestTurns) return OverflowPolicy::kTruncateOldestTurns;
  if (name == kOverflowTruncateMiddle) return OverflowPolicy::kTruncateMiddle;
  return OverflowPolicy::kReject;
}

std::string_view OverflowPolicyName(OverflowPolicy p) {
  switch (p) {
    case OverflowPolicy::kTruncateOldestTurns: return kOverflowTruncateOldestTurns;
    case OverflowPolicy::kTruncateMiddle: return kOverflowTruncateMiddle;
    case OverflowPolicy::kReject: break;
  }
  return kOverflowReject;
}

int64_t CleanText(std::string* s) {
  std::string out;
  int64_t removed = 0;
  size_t i = 0, kept_from = 0;
  while (i < s->size()) {
    uint32_t cp = 0;
    const size_t n = Utf8Next(*s, i, &cp);
    if (n == 0) {  // malformed: left as it is
      ++i;
      continue;
    }
    if (Removed(cp)) {
      out.append(*s, kept_from, i - kept_from);
      kept_from = i + n;
      ++removed;
    }
    i += n;
  }
  if (removed == 0) return 0;
  out.append(*s, kept_from, std::string::npos);
  *s = std::move(out);
  return removed;
}

int64_t CleanRequestBody(api::Endpoint endpoint, api::Dialect dialect, api::Json* body) {
  if (!body->is_object()) return 0;
  std::vector<const char*> roots;
  if (!ChatLike(endpoint)) {
    roots = {"prompt"};
  } else if (dialect == api::Dialect::kResponses) {
    roots = {"instructions", "input"};
  } else if (dialect == api::Dialect::kAnthropic) {
    roots = {"system", "messages"};
  } else {
    roots = {"messages"};
  }
  std::vector<std::string*> texts;
  for (const char* r : roots) {
    auto it = body->find(r);
    if (it != body->end()) CollectTexts(&*it, &texts);
  }
  int64_t n = 0;
  for (std::string* t : texts) n += CleanText(t);
  return n;
}

std::optional<api::ApiError> FitPrompt(const PromptCounter& counter, api::Endpoint endpoint, api::Dialect dialect,
                                       OverflowPolicy policy, int64_t budget, api::Json* body, CountedRequest* counted,
                                       Fitted* fitted) {
  *fitted = Fitted{};
  fitted->prompt_tokens_before = counted->max_prompt_tokens;
  if (counted->max_prompt_tokens <= budget) return std::nullopt;
  if (budget < 1) {
    return CannotFit(ChatLike(endpoint) ? "messages" : "prompt", "max_tokens leaves no room for a prompt",
                     counted->max_prompt_tokens, budget);
  }
  Json work = *body;
  CountedRequest c = *counted;
  std::optional<api::ApiError> e;
  switch (policy) {
    case OverflowPolicy::kTruncateOldestTurns:
      e = DropOldestTurns(counter, endpoint, dialect, budget, &work, &c, fitted);
      break;
    case OverflowPolicy::kTruncateMiddle: e = CutLongestText(counter, endpoint, dialect, budget, &work, &c); break;
    case OverflowPolicy::kReject:
      return CannotFit(ChatLike(endpoint) ? "messages" : "prompt", "the policy is reject", counted->max_prompt_tokens,
                       budget);
  }
  if (e) return e;
  fitted->dropped_tokens = counted->max_prompt_tokens - c.max_prompt_tokens;
  *body = std::move(work);
  *counted = std::move(c);
  return std::nullopt;
}

}  // namespace kvs::gateway
