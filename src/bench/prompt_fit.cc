#include "bench/prompt_fit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "gguf/gguf.h"
#include "template/chat_template.h"
#include "template/model_chat.h"
#include "tokenizer/tokenizer.h"

namespace kvs::bench {

// --- LocalTokenCounter -------------------------------------------------------

LocalTokenCounter::~LocalTokenCounter() = default;

StatusOr<std::unique_ptr<LocalTokenCounter>> LocalTokenCounter::FromGguf(const std::string& path) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<gguf::GgufFile> file, gguf::GgufFile::Open(path));
  auto tok = tok::Tokenizer::FromGguf(*file);
  if (!tok.ok()) return tok.status().WithContext("the tokenizer of " + path);
  auto chat = tmpl::LoadModelChatTemplate(**tok);
  if (!chat.ok()) return chat.status().WithContext("the chat template of " + path);
  std::unique_ptr<LocalTokenCounter> c(new LocalTokenCounter());
  c->path_ = path;
  c->tok_ = std::move(*tok);
  c->template_ = std::make_unique<tmpl::ChatTemplate>(std::move(chat->tmpl));
  return c;
}

StatusOr<int64_t> LocalTokenCounter::CountPrompt(const std::string& text) {
  // As the server tokenizes a completions prompt: special tokens added,
  // none parsed out of the text.
  return static_cast<int64_t>(tok_->Encode(text, /*add_special=*/true, /*parse_special=*/false).size());
}

StatusOr<int64_t> LocalTokenCounter::CountChat(const std::vector<ChatMessage>& messages) {
  tmpl::ChatRequest r;
  for (const ChatMessage& m : messages) r.messages.push_back({{"role", m.role}, {"content", m.content}});
  r.add_generation_prompt = true;
  tmpl::SetSpecialTokens(*tok_, &r);
  auto text = template_->Render(r);
  if (!text.ok()) return text.status().WithContext("rendering the chat template");
  // The template writes BOS itself; its special tokens are parsed.
  return static_cast<int64_t>(tok_->Encode(*text, /*add_special=*/false, /*parse_special=*/true).size());
}

std::string LocalTokenCounter::Describe() const { return "the tokenizer of " + path_; }

// --- FitWords -----------------------------------------------------------------

StatusOr<FitResult> FitWords(size_t max_words, int64_t target,
                             const std::function<std::string(size_t, const std::string&)>& render,
                             const std::function<StatusOr<int64_t>(const std::string&)>& count,
                             const std::vector<std::string>* pad_pieces) {
  FitResult r;
  std::map<size_t, int64_t> seen;  // words -> tokens
  auto f = [&](size_t w) -> StatusOr<int64_t> {
    if (auto it = seen.find(w); it != seen.end()) return it->second;
    ++r.count_calls;
    KVS_ASSIGN_OR_RETURN(int64_t c, count(render(w, "")));
    seen[w] = c;
    return c;
  };
  KVS_ASSIGN_OR_RETURN(const int64_t base, f(0));
  if (base > target) {
    return InvalidArgument("a prompt of {} tokens is impossible: its fixed part alone has {} tokens", target, base);
  }
  size_t lo = 0;  // largest word count known to give <= target tokens
  std::optional<size_t> hi;  // smallest known to give > target
  int64_t lo_tokens = base;
  if (base < target && max_words > 0) {
    // English words average ~1.3 tokens; start a little low.
    size_t w = std::clamp<size_t>(static_cast<size_t>(static_cast<double>(target - base) / 1.4), 1, max_words);
    for (int iter = 0; iter < 24; ++iter) {
      KVS_ASSIGN_OR_RETURN(const int64_t c, f(w));
      if (c <= target) {
        if (w >= lo) {
          lo = w;
          lo_tokens = c;
        }
      } else if (!hi || w < *hi) {
        hi = w;
      }
      if (c == target) break;
      if (hi && *hi <= lo + 1) break;
      if (!hi && lo == max_words) break;  // the stream is too short
      // Secant step from the densest known points around the target.
      const double per_word = lo > 0 ? static_cast<double>(lo_tokens - base) / static_cast<double>(lo) : 1.3;
      double next = static_cast<double>(w) + static_cast<double>(target - c) / std::max(per_word, 0.05);
      size_t n = static_cast<size_t>(std::llround(std::max(next, 0.0)));
      const size_t upper = hi ? *hi - 1 : max_words;
      n = std::clamp(n, lo + 1, std::max(upper, lo + 1));
      if (n == w || seen.count(n)) n = hi ? lo + (*hi - lo) / 2 : std::min(max_words, lo + 1);
      if (n <= lo || seen.count(n)) n = lo + 1;
      if (n > upper) break;
      w = n;
    }
  }
  r.words = static_cast<int64_t>(lo);
  r.tokens = lo_tokens;
  r.text = render(lo, "");
  if (lo_tokens == target) {
    r.exact = true;
    return r;
  }
  if (!hi && lo == max_words && target - lo_tokens > 8) {
    return InvalidArgument("the text is too short for a prompt of {} tokens ({} words give {})", target, max_words,
                           lo_tokens);
  }
  // Close the gap with short pieces: words, each usually one token, or
  // short whole sentences where the caller keeps sentences whole. A gap the
  // pieces cannot close (one token, with sentences of two or more) is tried
  // again from a shorter start, which leaves a wider gap.
  static const std::vector<std::string> kPad = {"and", "so", "it", "is", "the", "of", "to", "in", "on", "a", "we", "he"};
  const std::vector<std::string>& pieces = pad_pieces ? *pad_pieces : kPad;
  // The next shorter start: fewer words until the count drops (with whole
  // sentences, to the previous sentence's end).
  auto shorter = [&](size_t from, int64_t from_tokens) -> StatusOr<std::optional<std::pair<size_t, int64_t>>> {
    for (size_t w = from; w > 0 && from - w < 64;) {
      --w;
      KVS_ASSIGN_OR_RETURN(const int64_t c, f(w));
      if (c < from_tokens) return std::optional<std::pair<size_t, int64_t>>({w, c});
    }
    return std::optional<std::pair<size_t, int64_t>>();
  };
  std::pair<size_t, int64_t> next_start = {lo, lo_tokens};
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) {
      KVS_ASSIGN_OR_RETURN(auto s, shorter(next_start.first, next_start.second));
      if (!s) break;
      next_start = *s;
    }
    auto [start, start_tokens] = next_start;
    std::string pad, text = render(start, "");
    int64_t tokens = start_tokens;
    // First a combination of pieces whose costs (each measured alone; token
    // counts are nearly additive) sum to the gap exactly, then greedy.
    const int64_t gap = target - start_tokens;
    if (gap > 0 && gap <= 256) {
      std::vector<int64_t> cost(pieces.size());
      for (size_t i = 0; i < pieces.size(); ++i) {
        ++r.count_calls;
        KVS_ASSIGN_OR_RETURN(const int64_t c, count(render(start, " " + pieces[i])));
        cost[i] = c - start_tokens;
      }
      std::vector<int> last(static_cast<size_t>(gap) + 1, -1);  // last[g]: a piece ending a sum of g
      last[0] = static_cast<int>(pieces.size());
      for (int64_t g = 1; g <= gap; ++g) {
        for (size_t i = 0; i < pieces.size() && last[static_cast<size_t>(g)] < 0; ++i) {
          if (cost[i] > 0 && cost[i] <= g && last[static_cast<size_t>(g - cost[i])] >= 0) {
            last[static_cast<size_t>(g)] = static_cast<int>(i);
          }
        }
      }
      if (last[static_cast<size_t>(gap)] >= 0) {
        std::string combo;
        for (int64_t g = gap; g > 0; g -= cost[static_cast<size_t>(last[static_cast<size_t>(g)])]) {
          combo += " " + pieces[static_cast<size_t>(last[static_cast<size_t>(g)])];
        }
        const std::string t = render(start, combo);
        ++r.count_calls;
        KVS_ASSIGN_OR_RETURN(const int64_t c, count(t));
        if (c == target) {
          pad = combo;
          text = t;
          tokens = c;
        }
      }
    }
    for (int tries = 0; tries < 40 && tokens < target; ++tries) {
      bool advanced = false;
      for (const std::string& piece : pieces) {
        const std::string cand = pad + " " + piece;
        const std::string t = render(start, cand);
        ++r.count_calls;
        KVS_ASSIGN_OR_RETURN(const int64_t c, count(t));
        if (c <= target && c > tokens) {
          pad = cand;
          text = t;
          tokens = c;
          advanced = true;
          break;
        }
      }
      if (!advanced) break;
    }
    if (tokens > r.tokens || (tokens == target && r.tokens != target) || start == lo) {
      r.text = text;
      r.tokens = tokens;
      r.words = static_cast<int64_t>(start);
    }
    if (r.tokens == target) break;
  }
  r.exact = r.tokens == target;
  return r;
}

const std::vector<std::string>& SentencePadPieces() {
  static const std::vector<std::string> kPieces = {"Yes.", "So it is.", "Go on.", "It is so.", "We wait.",
                                                   "All is well.", "It was so.", "Look."};
  return kPieces;
}

StatusOr<FitResult> FitPrompt(const WordStream& words, int64_t target, TokenCounter& counter) {
  return FitWords(
      words.words.size(), target,
      [&](size_t n, const std::string& pad) { return words.Join(n) + pad; },
      [&](const std::string& text) { return counter.CountPrompt(text); });
}

StatusOr<FitResult> FitChatMessage(const WordStream& words, int64_t target, TokenCounter& counter) {
  return FitWords(
      words.words.size(), target,
      [&](size_t n, const std::string& pad) { return words.Join(n) + pad; },
      [&](const std::string& text) { return counter.CountChat({{"user", text}}); });
}

}  // namespace kvs::bench
