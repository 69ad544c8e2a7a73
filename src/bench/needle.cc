#include "bench/needle.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace kvs::bench {

const char* NeedleVariantName(NeedleVariant v) {
  switch (v) {
    case NeedleVariant::kSingle: return "single";
    case NeedleVariant::kMultiKey: return "multikey";
    case NeedleVariant::kMultiValue: return "multivalue";
    case NeedleVariant::kMultiQuery: return "multiquery";
    case NeedleVariant::kVariableTracking: return "vt";
    case NeedleVariant::kCommonWords: return "cwe";
    case NeedleVariant::kFrequentWords: return "fwe";
  }
  return "?";
}

bool IsTaskVariant(NeedleVariant v) {
  return v == NeedleVariant::kVariableTracking || v == NeedleVariant::kCommonWords ||
         v == NeedleVariant::kFrequentWords;
}

StatusOr<NeedleVariant> ParseNeedleVariant(const std::string& s) {
  if (s == "single") return NeedleVariant::kSingle;
  if (s == "multikey" || s == "multi-key") return NeedleVariant::kMultiKey;
  if (s == "multivalue" || s == "multi-value") return NeedleVariant::kMultiValue;
  if (s == "multiquery" || s == "multi-query") return NeedleVariant::kMultiQuery;
  if (s == "vt" || s == "variable-tracking") return NeedleVariant::kVariableTracking;
  if (s == "cwe" || s == "common-words") return NeedleVariant::kCommonWords;
  if (s == "fwe" || s == "frequent-words") return NeedleVariant::kFrequentWords;
  return InvalidArgument("unknown needle variant '{}' (single, multikey, multivalue, multiquery, vt, cwe, fwe)", s);
}

NeedleTemplate DefaultTemplate(NeedleVariant v) {
  switch (v) {
    case NeedleVariant::kSingle:
      return {"The pass key is {value}. Remember it.", "What is the pass key?", "The pass key is"};
    case NeedleVariant::kMultiValue:
      return {"One of the special numbers for {key} is {value}.", "What are all the special numbers for {key}?",
              "The special numbers for {key} are"};
    case NeedleVariant::kMultiKey:
    case NeedleVariant::kMultiQuery:
    case NeedleVariant::kVariableTracking:
    case NeedleVariant::kCommonWords:
    case NeedleVariant::kFrequentWords:
      break;
  }
  return {"The secret number of {key} is {value}.", "What is the secret number of {key}?",
          "The secret number of {key} is"};
}

NeedleTemplate NeedleSpec::EffectiveTemplate() const {
  NeedleTemplate d = DefaultTemplate(variant);
  if (distractors > 0 && variant == NeedleVariant::kSingle && tmpl.fact.empty()) {
    // Distractors need keys: the keyed template.
    d = DefaultTemplate(NeedleVariant::kMultiKey);
  }
  NeedleTemplate t = tmpl;
  if (t.fact.empty()) t.fact = d.fact;
  if (t.question.empty()) t.question = d.question;
  if (t.answer_prefix.empty()) t.answer_prefix = d.answer_prefix;
  return t;
}

namespace {


std::string Fill(const std::string& tmpl, const std::string& key, const std::string& value) {
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 5, "{key}") == 0) {
      out += key;
      i += 5;
    } else if (tmpl.compare(i, 7, "{value}") == 0) {
      out += value;
      i += 7;
    } else {
      out += tmpl[i++];
    }
  }
  return out;
}

bool HasKey(const std::string& t) { return t.find("{key}") != std::string::npos; }

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || (c & 0x80); }

}  // namespace

Status ValidateNeedleSpec(const NeedleSpec& s) {
  if (s.lengths.empty()) return InvalidArgument("no context lengths to test");
  for (int64_t l : s.lengths) {
    if (l < 16) return InvalidArgument("context length {} is too short for a needle test (>= 16 tokens)", l);
  }
  if (s.depths.empty()) return InvalidArgument("no depths to test");
  for (double d : s.depths) {
    if (!(d >= 0 && d <= 1)) return InvalidArgument("depth {} is outside [0, 1]", d);
  }
  if (s.trials < 1 || s.trials > 10000) return InvalidArgument("trials must be in [1, 10000]");
  if (s.value_digits < 1 || s.value_digits > 18) return InvalidArgument("value digits must be in [1, 18]");
  if (s.value_kind != "digits" && s.value_kind != "uuid" && s.value_kind != "words") {
    return InvalidArgument("value kind '{}': expected digits, uuid or words", s.value_kind);
  }
  if (s.hops < 1 || s.hops > 50) return InvalidArgument("hops must be in [1, 50]");
  if (s.common_words < 1 || s.common_words > 50) return InvalidArgument("common words must be in [1, 50]");
  if (IsTaskVariant(s.variant)) {
    if (s.threshold < 0 || s.threshold > 1) return InvalidArgument("threshold must be in [0, 1]");
    if (s.distractors < 0 || s.distractors > 20) return InvalidArgument("distractors must be in [0, 20] for vt");
    return Status::Ok();
  }
  if (s.needles < 2 && s.variant == NeedleVariant::kMultiKey) return InvalidArgument("multikey needs >= 2 needles");
  if (s.values < 2 && s.variant == NeedleVariant::kMultiValue) return InvalidArgument("multivalue needs >= 2 values");
  if (s.queries < 2 && s.variant == NeedleVariant::kMultiQuery) {
    return InvalidArgument("multiquery needs >= 2 queries");
  }
  if (s.distractors < 0 || s.distractors > 100) return InvalidArgument("distractors must be in [0, 100]");
  if (s.threshold < 0 || s.threshold > 1) return InvalidArgument("threshold must be in [0, 1]");
  const NeedleTemplate t = s.EffectiveTemplate();
  if (t.fact.find("{value}") == std::string::npos) return InvalidArgument("the needle template has no {{value}}");
  const bool keyed = s.variant != NeedleVariant::kSingle || s.distractors > 0;
  if (keyed && (!HasKey(t.fact) || !HasKey(t.question))) {
    return InvalidArgument("variant {} with {} distractors needs {{key}} in the needle and the question templates",
                           NeedleVariantName(s.variant), s.distractors);
  }
  const size_t keys_needed = static_cast<size_t>(
      (s.variant == NeedleVariant::kMultiKey ? s.needles : s.variant == NeedleVariant::kMultiQuery ? s.queries : 1) +
      s.distractors);
  const size_t pool = s.keys.empty() ? GivenNames().size() : s.keys.size();
  if (keyed && keys_needed > pool) {
    return InvalidArgument("{} distinct keys are needed but the key pool has {}", keys_needed, pool);
  }
  return Status::Ok();
}

nlohmann::json NeedleSpec::ToJson() const {
  const NeedleTemplate t = EffectiveTemplate();
  return {{"lengths", lengths},
          {"depths", depths},
          {"trials", trials},
          {"variant", NeedleVariantName(variant)},
          {"needles", needles},
          {"values", values},
          {"queries", queries},
          {"distractors", distractors},
          {"template", {{"needle", t.fact}, {"question", t.question}, {"answer_prefix", t.answer_prefix}}},
          {"value_digits", value_digits},
          {"value_kind", value_kind},
          {"hops", hops},
          {"common_words", common_words},
          {"haystack", haystack},
          {"api", ApiKindName(api)},
          {"max_tokens", max_tokens},
          {"threshold", threshold},
          {"seed", seed}};
}

StatusOr<NeedleCase> BuildCase(const NeedleSpec& spec, int64_t length, double depth, int trial,
                               const TextSource& haystack, TokenCounter& counter) {
  KVS_RETURN_IF_ERROR(ValidateNeedleSpec(spec));
  if (IsTaskVariant(spec.variant)) {
    return InvalidArgument("variant {} is built by BuildTaskCase (needle_tasks.h)", NeedleVariantName(spec.variant));
  }
  const NeedleTemplate t = spec.EffectiveTemplate();
  // A generator per (cell, trial): fresh needles everywhere, reproducible.
  Rng rng(spec.seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(length) << 20) ^
          (static_cast<uint64_t>(std::llround(depth * 1000)) << 8) ^ static_cast<uint64_t>(trial));
  rng.discard(8);
  std::vector<std::string> keys;
  if (spec.keys.empty()) {
    keys.assign(GivenNames().begin(), GivenNames().end());
  } else {
    keys = spec.keys;
  }
  std::shuffle(keys.begin(), keys.end(), rng);
  size_t next_key = 0;
  std::set<std::string> used_values;
  auto new_value = [&] {
    for (;;) {
      std::string v = NeedleValue(rng, spec.value_kind, spec.value_digits);
      if (used_values.insert(v).second || (spec.value_kind == "digits" && spec.value_digits < 3)) return v;
    }
  };
  auto random_depth = [&] { return std::uniform_real_distribution<double>(0, 1)(rng); };
  NeedleCase c;
  c.length = length;
  c.depth = depth;
  c.trial = trial;
  auto add = [&](const std::string& key, double d, bool asked) {
    Needle n;
    n.key = key;
    n.value = new_value();
    n.depth = d;
    n.asked = asked;
    n.text = Fill(t.fact, key, n.value);
    c.needles.push_back(n);
  };
  const bool keyed = HasKey(t.fact);
  auto key = [&]() -> std::string { return keyed ? keys[next_key++ % keys.size()] : std::string(); };
  switch (spec.variant) {
    case NeedleVariant::kSingle:
      add(key(), depth, true);
      break;
    case NeedleVariant::kMultiKey:
      add(key(), depth, true);
      for (int i = 1; i < spec.needles; ++i) add(key(), random_depth(), false);
      break;
    case NeedleVariant::kMultiValue: {
      const std::string k = key();
      add(k, depth, true);
      for (int i = 1; i < spec.values; ++i) add(k, random_depth(), true);
      break;
    }
    case NeedleVariant::kMultiQuery:
      add(key(), depth, true);
      for (int i = 1; i < spec.queries; ++i) add(key(), random_depth(), true);
      break;
    case NeedleVariant::kVariableTracking:
    case NeedleVariant::kCommonWords:
    case NeedleVariant::kFrequentWords:
      break;  // refused above
  }
  for (int i = 0; i < spec.distractors; ++i) add(key(), random_depth(), false);
  // The question: one per asked key, in the order the needles were made.
  std::vector<std::string> asked_keys;
  for (const Needle& n : c.needles) {
    if (!n.asked) continue;
    c.expected.push_back(n.value);
    if (std::find(asked_keys.begin(), asked_keys.end(), n.key) == asked_keys.end()) asked_keys.push_back(n.key);
  }
  std::string question;
  for (const std::string& k : asked_keys) {
    if (!question.empty()) question += " ";
    question += Fill(t.question, k, "");
  }
  const std::string answer_prefix = Fill(t.answer_prefix, asked_keys.front(), "");
  // Enough new tokens for the values (digits may be one token each) and
  // their separators, plus slack.
  c.max_tokens = AnswerTokenBudget(spec);
  KVS_RETURN_IF_ERROR(FitHaystack(spec, haystack, counter, rng, question, answer_prefix, &c));
  return c;
}

std::string NeedleValue(Rng& rng, const std::string& kind, int digits) {
  if (kind == "uuid") {
    // 8-4-4-4-12 lowercase hex, version 4 layout.
    static const char* kHex = "0123456789abcdef";
    std::string v;
    for (int i = 0; i < 32; ++i) {
      if (i == 8 || i == 12 || i == 16 || i == 20) v += '-';
      v += i == 12 ? '4' : kHex[std::uniform_int_distribution<int>(0, 15)(rng)];
    }
    return v;
  }
  if (kind == "words") {
    static const char* kWords[] = {"amber",  "basket", "candle", "dolphin", "emerald", "falcon", "glacier", "harbor",
                                   "island", "jasmine", "kettle", "lantern", "meadow", "nectar", "orchid", "pepper",
                                   "quartz", "raven",  "saddle", "thistle", "umbrella", "violet", "walnut", "yarrow",
                                   "zephyr", "bramble", "copper", "dune",   "ember",  "fern",   "granite", "hazel"};
    return kWords[std::uniform_int_distribution<size_t>(0, std::size(kWords) - 1)(rng)];
  }
  std::string v(1, static_cast<char>('1' + std::uniform_int_distribution<int>(0, 8)(rng)));
  for (int i = 1; i < digits; ++i) v += static_cast<char>('0' + std::uniform_int_distribution<int>(0, 9)(rng));
  return v;
}

Status FitHaystack(const NeedleSpec& spec, const TextSource& haystack, TokenCounter& counter, Rng& rng,
                   const std::string& question, const std::string& answer_prefix, NeedleCase* out) {
  NeedleCase& c = *out;
  const int64_t length = c.length;
  // The haystack: words of the source; needles go in at the sentence
  // boundary nearest their depth among the first `w` words.
  WordStream ws = MakeWords(haystack, rng, static_cast<size_t>(length) + 16);
  const bool lead_space = spec.haystack == "filler";
  auto render = [&](size_t w, const std::string& pad) -> std::string {
    // Whole sentences only: the haystack ends where a sentence does, and
    // the pad is short sentences (no "The sky is and The pass key is").
    while (w > 0 && !ws.sentence_end[w - 1]) --w;
    std::vector<size_t> bounds = {0};
    for (size_t i = 0; i < w; ++i) {
      if (ws.sentence_end[i]) bounds.push_back(i + 1);
    }
    if (bounds.back() != w) bounds.push_back(w);
    // (boundary, needle index) pairs, sorted by boundary then needle order.
    std::vector<std::pair<size_t, size_t>> at;
    for (size_t ni = 0; ni < c.needles.size(); ++ni) {
      const double target = c.needles[ni].depth * static_cast<double>(w);
      size_t best = bounds[0];
      for (size_t b : bounds) {
        if (std::fabs(static_cast<double>(b) - target) < std::fabs(static_cast<double>(best) - target)) best = b;
      }
      at.emplace_back(best, ni);
    }
    std::stable_sort(at.begin(), at.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::string body;
    auto append = [&](std::string piece) {
      piece.erase(0, piece.find_first_not_of(' '));
      if (piece.empty()) return;
      if (!body.empty()) body += ' ';
      body += piece;
    };
    // The pad closes the haystack's words; a needle at the very end follows it.
    size_t prev = 0;
    bool pad_done = false;
    for (auto [b, ni] : at) {
      std::string seg = ws.Join(prev, b);
      if (b == w && !pad_done) {
        seg += pad;
        pad_done = true;
      }
      append(seg);
      prev = b;
      append(c.needles[ni].text);
    }
    std::string tail = ws.Join(prev, w);
    if (!pad_done) tail += pad;
    append(tail);
    const std::string lead = lead_space ? " " : "";
    if (spec.api == ApiKind::kChat) return lead + body + "\n" + question;
    return lead + body + " " + question + " " + answer_prefix;
  };
  std::function<StatusOr<int64_t>(const std::string&)> count;
  if (spec.api == ApiKind::kChat) {
    count = [&](const std::string& text) { return counter.CountChat({{"user", text}}); };
  } else {
    count = [&](const std::string& text) { return counter.CountPrompt(text); };
  }
  KVS_ASSIGN_OR_RETURN(FitResult fit, FitWords(ws.words.size(), length, render, count, &SentencePadPieces()));
  (spec.api == ApiKind::kChat ? c.user_message : c.prompt) = fit.text;
  c.tokens = fit.tokens;
  c.exact = fit.exact;
  return Status::Ok();
}

int64_t AnswerTokenBudget(const NeedleSpec& spec) {
  if (spec.max_tokens > 0) return spec.max_tokens;
  const int64_t chat = spec.api == ApiKind::kChat ? 16 : 0;
  switch (spec.variant) {
    case NeedleVariant::kVariableTracking: return (spec.hops + 1) * 6 + 12 + chat;
    case NeedleVariant::kCommonWords: return spec.common_words * 5 + 12 + chat;
    case NeedleVariant::kFrequentWords: return 3 * 6 + 12 + chat;
    default: break;
  }
  const int64_t values = spec.variant == NeedleVariant::kMultiValue   ? spec.values
                         : spec.variant == NeedleVariant::kMultiQuery ? spec.queries
                                                                      : 1;
  const int64_t per_value = spec.value_kind == "uuid" ? 28 : spec.value_kind == "words" ? 3 : spec.value_digits;
  // A digit may be a token of its own; separators and a sentence around the
  // values, more in chat mode where the answer restates the question.
  return values * (per_value + 4) + 12 + chat;
}

bool ContainsValue(const std::string& answer, const std::string& value) {
  if (value.empty()) return false;
  for (size_t p = answer.find(value); p != std::string::npos; p = answer.find(value, p + 1)) {
    const bool left_ok = p == 0 || !IsWordChar(answer[p - 1]);
    const size_t e = p + value.size();
    const bool right_ok = e >= answer.size() || !IsWordChar(answer[e]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

double ScoreAnswer(const std::string& answer, const std::vector<std::string>& expected) {
  if (expected.empty()) return 0;
  int found = 0;
  for (const std::string& v : expected) found += ContainsValue(answer, v);
  return static_cast<double>(found) / static_cast<double>(expected.size());
}

std::string NeedleResult::MissKind() const {
  if (hit) return "";
  if (!error.empty()) return "error";
  for (const std::string& v : others) {
    if (ContainsValue(answer, v)) return "distractor";
  }
  return score > 0 ? "partial" : "none";
}

NeedleSummary SummarizeNeedle(const std::vector<NeedleResult>& results, const std::vector<int64_t>& lengths,
                              const std::vector<double>& depths, double threshold) {
  NeedleSummary s;
  s.lengths = lengths;
  s.depths = depths;
  s.threshold = threshold;
  s.cells.assign(lengths.size(), std::vector<NeedleCell>(depths.size()));
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (size_t j = 0; j < depths.size(); ++j) {
      s.cells[i][j].length = lengths[i];
      s.cells[i][j].depth = depths[j];
    }
  }
  double chance_sum = 0;
  int64_t chance_cases = 0;
  for (const NeedleResult& r : results) {
    const auto li = std::find(lengths.begin(), lengths.end(), r.length);
    auto dj = std::find_if(depths.begin(), depths.end(), [&](double d) { return std::fabs(d - r.depth) < 1e-9; });
    if (li == lengths.end() || dj == depths.end()) continue;
    NeedleCell& cell = s.cells[static_cast<size_t>(li - lengths.begin())][static_cast<size_t>(dj - depths.begin())];
    ++cell.trials;
    cell.hits += r.hit;
    cell.errors += !r.error.empty();
    ++s.requests;
    s.hits += r.hit;
    s.errors += !r.error.empty();
    if (!r.hit) ++s.misses[r.MissKind()];
    if (r.expected.size() == 1 && !r.others.empty()) {
      chance_sum += 1.0 / static_cast<double>(1 + r.others.size());
      ++chance_cases;
    }
  }
  if (chance_cases > 0) s.chance_level = chance_sum / static_cast<double>(chance_cases);
  s.overall = s.requests > 0 ? static_cast<double>(s.hits) / static_cast<double>(s.requests) : 0;
  s.overall_interval = WilsonInterval(s.hits, s.requests);
  std::vector<bool> passes(lengths.size(), false);
  for (size_t i = 0; i < lengths.size(); ++i) {
    int trials = 0, hits = 0;
    bool all = true;
    for (const NeedleCell& c : s.cells[i]) {
      trials += c.trials;
      hits += c.hits;
      if (c.trials == 0 || WilsonInterval(c.hits, c.trials).hi + 1e-12 < threshold) all = false;
    }
    s.recall_by_length.push_back(trials > 0 ? static_cast<double>(hits) / trials : 0.0);
    s.interval_by_length.push_back(WilsonInterval(hits, trials));
    passes[i] = all;
  }
  // Effective length: the largest tested length passing at every depth.
  std::optional<size_t> eff;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (passes[i] && (!eff || lengths[i] > lengths[*eff])) eff = i;
  }
  if (eff) {
    s.effective_length = lengths[*eff];
    for (size_t i = 0; i < lengths.size(); ++i) {
      if (lengths[i] < lengths[*eff] && !passes[i]) s.failing_below_effective.push_back(lengths[i]);
    }
  }
  // Late positions recalled worse than early ones: compare depths < 0.5
  // with depths > 0.5, per length; warn when the late half is at least 10
  // points lower and some late cell is below the threshold.
  for (size_t i = 0; i < lengths.size(); ++i) {
    int et = 0, eh = 0, lt = 0, lh = 0;
    bool late_below = false;
    double late_from = 1;
    for (size_t j = 0; j < depths.size(); ++j) {
      const NeedleCell& c = s.cells[i][j];
      if (depths[j] < 0.5) {
        et += c.trials;
        eh += c.hits;
      } else if (depths[j] > 0.5) {
        lt += c.trials;
        lh += c.hits;
        if (c.trials > 0 && c.recall() + 1e-12 < threshold) {
          late_below = true;
          late_from = std::min(late_from, depths[j]);
        }
      }
    }
    // Too few cases on either side say nothing.
    if (et < 4 || lt < 4) continue;
    const double early = static_cast<double>(eh) / et, late = static_cast<double>(lh) / lt;
    if (late_below && early - late >= 0.10) {
      s.late_position_warnings.push_back(fmt::format(
          "at {} tokens, needles in the second half of the context are recalled {:.0f} % vs {:.0f} % in the first "
          "half (below {:.0f} % from depth {:.0f} %): {} tokens looks past the model's effective range",
          lengths[i], late * 100, early * 100, threshold * 100, late_from * 100, lengths[i]));
    }
  }
  return s;
}

nlohmann::json NeedleSummary::ToJson() const {
  nlohmann::json j;
  j["threshold"] = threshold;
  j["requests"] = requests;
  j["hits"] = hits;
  j["errors"] = errors;
  j["overall_recall"] = overall;
  j["overall_recall_interval"] = {overall_interval.lo, overall_interval.hi};
  j["interval"] = "Wilson 95 %";
  j["effective_context_length"] = effective_length ? nlohmann::json(*effective_length) : nlohmann::json(nullptr);
  j["lengths_failing_below_effective"] = failing_below_effective;
  j["late_position_warnings"] = late_position_warnings;
  j["misses"] = misses;
  j["chance_level"] = chance_level ? nlohmann::json(*chance_level) : nlohmann::json(nullptr);
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < lengths.size(); ++i) {
    nlohmann::json row;
    row["length"] = lengths[i];
    row["recall"] = recall_by_length[i];
    row["recall_interval"] = {interval_by_length[i].lo, interval_by_length[i].hi};
    nlohmann::json cs = nlohmann::json::array();
    for (const NeedleCell& c : cells[i]) {
      const ProportionInterval ci = WilsonInterval(c.hits, c.trials);
      cs.push_back({{"depth", c.depth}, {"trials", c.trials}, {"hits", c.hits}, {"errors", c.errors},
                    {"recall", c.recall()}, {"recall_interval", {ci.lo, ci.hi}}});
    }
    row["cells"] = cs;
    rows.push_back(row);
  }
  j["grid"] = rows;
  return j;
}

StatusOr<std::vector<double>> ParseDepths(const std::string& s) {
  std::vector<double> out;
  auto num = [](const std::string& t) -> std::optional<double> {
    try {
      size_t used = 0;
      double v = std::stod(t, &used);
      if (used != t.size() || !std::isfinite(v)) return std::nullopt;
      return v;
    } catch (...) {
      return std::nullopt;
    }
  };
  std::vector<std::string> parts;
  std::string cur;
  const char sep = s.find(':') != std::string::npos ? ':' : ',';
  for (char ch : s) {
    if (ch == sep) {
      parts.push_back(cur);
      cur.clear();
    } else if (ch != ' ' && ch != '%') {
      cur += ch;
    }
  }
  parts.push_back(cur);
  const bool percent = s.find('%') != std::string::npos;
  std::vector<double> vals;
  for (const std::string& p : parts) {
    auto v = num(p);
    if (!v) return InvalidArgument("bad depth '{}' in '{}'", p, s);
    vals.push_back(*v);
  }
  const bool scale = percent || std::any_of(vals.begin(), vals.end(), [](double v) { return v > 1; });
  if (scale) {
    for (double& v : vals) v /= 100;
  }
  if (sep == ':') {
    if (vals.size() != 3 || vals[2] <= 0 || vals[1] < vals[0]) {
      return InvalidArgument("bad depth range '{}': expected FROM:TO:STEP, e.g. 0:1:0.1 or 0:100:10", s);
    }
    for (int k = 0;; ++k) {
      const double v = vals[0] + k * vals[2];
      if (v > vals[1] + 1e-9) break;
      out.push_back(std::round(v * 1e6) / 1e6);
    }
  } else {
    out = vals;
  }
  for (double v : out) {
    if (v < 0 || v > 1) return InvalidArgument("depth {} in '{}' is outside 0-100 %", v, s);
  }
  return out;
}

}  // namespace kvs::bench
