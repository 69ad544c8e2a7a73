#include "bench/needle_tasks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "bench/html.h"
#include "bench/needle_report.h"

namespace kvs::bench {

namespace {

// Made-up words of `syllables` consonant-vowel pairs, distinct within one
// generator's use.
class WordMaker {
 public:
  explicit WordMaker(Rng& rng) : rng_(rng) {}
  std::string Next(int syllables) {
    static const char kC[] = "bdfgklmnprstvz";
    static const char kV[] = "aeiou";
    for (;;) {
      std::string w;
      for (int i = 0; i < syllables; ++i) {
        w += kC[std::uniform_int_distribution<size_t>(0, sizeof(kC) - 2)(rng_)];
        w += kV[std::uniform_int_distribution<size_t>(0, sizeof(kV) - 2)(rng_)];
      }
      if (used_.insert(w).second) return w;
    }
  }
  std::string Upper(int letters) {
    for (;;) {
      std::string w;
      for (int i = 0; i < letters; ++i) w += static_cast<char>('A' + std::uniform_int_distribution<int>(0, 25)(rng_));
      if (used_.insert(w).second) return w;
    }
  }

 private:
  Rng& rng_;
  std::set<std::string> used_;
};

Rng CaseRng(const NeedleSpec& spec, int64_t length, double depth, int trial) {
  Rng rng(spec.seed * 0x2545F4914F6CDD1Dull ^ (static_cast<uint64_t>(length) << 20) ^
          (static_cast<uint64_t>(std::llround(depth * 1000)) << 8) ^ static_cast<uint64_t>(trial) ^
          (static_cast<uint64_t>(spec.variant) << 40));
  rng.discard(8);
  return rng;
}

std::function<StatusOr<int64_t>(const std::string&)> Counter(const NeedleSpec& spec, TokenCounter& counter) {
  if (spec.api == ApiKind::kChat) {
    return [&counter](const std::string& text) { return counter.CountChat({{"user", text}}); };
  }
  return [&counter](const std::string& text) { return counter.CountPrompt(text); };
}

std::string Close(const NeedleSpec& spec, const std::string& body, const std::string& question,
                  const std::string& prefix) {
  return spec.api == ApiKind::kChat ? body + "\n" + question : body + "\n" + question + " " + prefix;
}

// A cwe / fwe case from its fitted prompt (the expected words are the
// caller's).
NeedleCase ListCase(const NeedleSpec& spec, int64_t length, int trial, const FitResult& fit) {
  NeedleCase c;
  c.length = length;
  c.trial = trial;
  c.max_tokens = AnswerTokenBudget(spec);
  (spec.api == ApiKind::kChat ? c.user_message : c.prompt) = fit.text;
  c.tokens = fit.tokens;
  c.exact = fit.exact;
  return c;
}

StatusOr<NeedleCase> VariableTracking(const NeedleSpec& spec, int64_t length, double depth, int trial,
                                      const TextSource& haystack, TokenCounter& counter) {
  Rng rng = CaseRng(spec, length, depth, trial);
  WordMaker names(rng);
  NeedleCase c;
  c.length = length;
  c.depth = depth;
  c.trial = trial;
  c.max_tokens = AnswerTokenBudget(spec);
  std::set<std::string> values;
  auto chain = [&](double from, bool asked) {
    std::string value;
    do {
      value = NeedleValue(rng, "digits", spec.value_digits);
    } while (!values.insert(value).second);
    std::string prev;
    for (int i = 0; i <= spec.hops; ++i) {
      Needle n;
      n.key = names.Upper(5);
      n.value = n.key;
      n.asked = asked;
      // The first assignment at `from`, the next ones spread after it.
      n.depth = from + (1 - from) * static_cast<double>(i) / static_cast<double>(spec.hops + 1);
      n.text = i == 0 ? fmt::format("VAR {} = {}.", n.key, value) : fmt::format("VAR {} = VAR {}.", n.key, prev);
      prev = n.key;
      c.needles.push_back(n);
    }
    return value;
  };
  const std::string value = chain(depth, true);
  for (int d = 0; d < spec.distractors; ++d) chain(std::uniform_real_distribution<double>(0, 1)(rng), false);
  // FitHaystack keeps needle order among equal boundaries: sort by depth,
  // stable, so every chain reads forward.
  std::stable_sort(c.needles.begin(), c.needles.end(), [](const Needle& a, const Needle& b) { return a.depth < b.depth; });
  for (const Needle& n : c.needles) {
    if (n.asked) c.expected.push_back(n.value);
  }
  const std::string question =
      fmt::format("Which variables hold the value {} in the text above, directly or through other variables?", value);
  const std::string prefix = fmt::format("The variables that hold the value {} are:", value);
  KVS_RETURN_IF_ERROR(FitHaystack(spec, haystack, counter, rng, question, prefix, &c));
  return c;
}

StatusOr<NeedleCase> CommonWords(const NeedleSpec& spec, int64_t length, int trial, TokenCounter& counter) {
  Rng rng = CaseRng(spec, length, 0, trial);
  WordMaker words(rng);
  const int k = spec.common_words;
  // An item ("12. kobami") is about 5 tokens; the common words take at most
  // about a third of the list, between 30 and 4 times each, always at least
  // two more than the rest.
  const int64_t items = std::max<int64_t>(length / 5, 1);
  const int common_freq = static_cast<int>(std::clamp<int64_t>(items / 3 / k, 4, 30));
  const int rare_freq = common_freq >= 10 ? 3 : 2;
  std::vector<std::string> common, rare;
  for (int i = 0; i < k; ++i) common.push_back(words.Next(3));
  // Enough rare words for any tokenizer (an item is at least one token).
  for (int64_t i = 0; i < length / rare_freq + 16; ++i) rare.push_back(words.Next(3));
  const std::string header =
      "Below is a numbered list of words. Some words appear many times in it, most only a few times. Keep track of "
      "the words that appear most often.";
  const std::string question = fmt::format("Which {} words appear most often in the list above?", k);
  const std::string prefix = fmt::format("The {} words that appear most often in the list are:", k);
  const uint64_t order_seed = rng();
  auto render = [&](size_t w, const std::string&) {
    std::vector<const std::string*> list;
    for (const std::string& c : common) {
      for (int i = 0; i < common_freq; ++i) list.push_back(&c);
    }
    for (size_t r = 0; r < w && r < rare.size(); ++r) {
      for (int i = 0; i < rare_freq; ++i) list.push_back(&rare[r]);
    }
    Rng order(order_seed);
    std::shuffle(list.begin(), list.end(), order);
    std::string body = header;
    for (size_t i = 0; i < list.size(); ++i) body += fmt::format("\n{}. {}", i + 1, *list[i]);
    return Close(spec, body, question, prefix);
  };
  KVS_ASSIGN_OR_RETURN(FitResult fit, FitWords(rare.size(), length, render, Counter(spec, counter)));
  NeedleCase c = ListCase(spec, length, trial, fit);
  c.expected = common;
  for (const std::string& w : common) c.needles.push_back({w, w, 0, true, w});
  return c;
}

StatusOr<NeedleCase> FrequentWords(const NeedleSpec& spec, int64_t length, int trial, TokenCounter& counter) {
  Rng rng = CaseRng(spec, length, 0, trial);
  WordMaker words(rng);
  constexpr int kVocab = 64;
  std::vector<std::string> vocab;
  for (int i = 0; i < kVocab; ++i) vocab.push_back(words.Next(2));
  std::vector<double> weights;
  for (int i = 1; i <= kVocab; ++i) weights.push_back(1.0 / (static_cast<double>(i) * i));  // Zipf, exponent 2
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  std::vector<int> seq(static_cast<size_t>(length) + 16);
  for (int& x : seq) x = pick(rng);
  const std::string header =
      "Read the coded text below and count how often each coded word appears. The dots are not words.\nText:";
  const std::string question = "Which three coded words appear most often in the text above?";
  const std::string prefix = "The three coded words that appear most often are:";
  auto render = [&](size_t w, const std::string&) {
    std::string body = header;
    for (size_t i = 0; i < w; ++i) body += " " + vocab[static_cast<size_t>(seq[i])];
    return Close(spec, body + " ....", question, prefix);
  };
  KVS_ASSIGN_OR_RETURN(FitResult fit, FitWords(seq.size(), length, render, Counter(spec, counter)));
  // The three most frequent in the text as fitted (ties: the earlier word).
  std::map<int, int64_t> counts;
  for (int64_t i = 0; i < fit.words; ++i) ++counts[seq[static_cast<size_t>(i)]];
  std::vector<std::pair<int64_t, int>> ranked;
  for (auto [word, n] : counts) ranked.emplace_back(-n, word);
  std::sort(ranked.begin(), ranked.end());
  NeedleCase c = ListCase(spec, length, trial, fit);
  for (size_t i = 0; i < ranked.size(); ++i) {
    const std::string& w = vocab[static_cast<size_t>(ranked[i].second)];
    c.needles.push_back({w, w, 0, i < 3, w});
    if (i < 3) c.expected.push_back(w);
  }
  return c;
}

}  // namespace

StatusOr<NeedleCase> BuildAnyCase(const NeedleSpec& spec, int64_t length, double depth, int trial,
                                  const TextSource& haystack, TokenCounter& counter) {
  KVS_RETURN_IF_ERROR(ValidateNeedleSpec(spec));
  switch (spec.variant) {
    case NeedleVariant::kVariableTracking: return VariableTracking(spec, length, depth, trial, haystack, counter);
    case NeedleVariant::kCommonWords: return CommonWords(spec, length, trial, counter);
    case NeedleVariant::kFrequentWords: return FrequentWords(spec, length, trial, counter);
    default: return BuildCase(spec, length, depth, trial, haystack, counter);
  }
}

StatusOr<std::vector<NeedleVariant>> ParseNeedleTasks(const std::string& s) {
  std::vector<NeedleVariant> out;
  if (s == "ruler" || s == "all") {
    for (NeedleVariant v : {NeedleVariant::kSingle, NeedleVariant::kMultiKey, NeedleVariant::kMultiValue,
                            NeedleVariant::kMultiQuery, NeedleVariant::kVariableTracking, NeedleVariant::kCommonWords,
                            NeedleVariant::kFrequentWords}) {
      out.push_back(v);
    }
    return out;
  }
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    KVS_ASSIGN_OR_RETURN(NeedleVariant v, ParseNeedleVariant(item));
    if (std::find(out.begin(), out.end(), v) != out.end()) return InvalidArgument("task {} is listed twice", item);
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("no tasks in '{}' (ruler, or a list such as single,vt,cwe)", s);
  return out;
}

std::vector<double> AggregateByLength(const std::vector<TaskScore>& tasks, size_t lengths) {
  std::vector<double> out(lengths, 0);
  if (tasks.empty()) return out;
  for (const TaskScore& t : tasks) {
    for (size_t i = 0; i < lengths && i < t.score_by_length.size(); ++i) out[i] += t.score_by_length[i];
  }
  for (double& v : out) v /= static_cast<double>(tasks.size());
  return out;
}

std::string TaskTable(const std::vector<TaskScore>& tasks, const std::vector<int64_t>& lengths) {
  std::string o = "=== tasks: mean score (share of the expected values found), recall in brackets\n";
  o += fmt::format("  {:<12}", "task");
  for (int64_t l : lengths) o += fmt::format(" {:>13}", l);
  o += fmt::format(" {:>13}\n", "all");
  double total = 0;
  for (const TaskScore& t : tasks) {
    o += fmt::format("  {:<12}", NeedleVariantName(t.task));
    for (size_t i = 0; i < lengths.size(); ++i) {
      const double recall = i < t.summary.recall_by_length.size() ? t.summary.recall_by_length[i] : 0;
      o += fmt::format(" {:>5.1f}% ({:>3.0f}%)", t.score_by_length[i] * 100, recall * 100);
    }
    o += fmt::format(" {:>5.1f}% ({:>3.0f}%)\n", t.score * 100, t.summary.overall * 100);
    total += t.score;
  }
  const std::vector<double> agg = AggregateByLength(tasks, lengths.size());
  o += fmt::format("  {:<12}", "aggregate");
  for (double v : agg) o += fmt::format(" {:>5.1f}%       ", v * 100);
  o += fmt::format(" {:>5.1f}%\n", tasks.empty() ? 0 : total / static_cast<double>(tasks.size()) * 100);
  return o;
}

std::string TaskSuiteHtml(const std::vector<TaskScore>& tasks, const std::vector<int64_t>& lengths,
                          const std::string& model, const std::string& url) {
  HtmlPage page("kvserve needle: RULER tasks");
  page.P(fmt::format("endpoint {}, model {}", url, model));
  page.H2("Scores by task and length");
  std::vector<std::string> header = {"task"};
  for (int64_t l : lengths) header.push_back(fmt::format("{} tokens", l));
  header.push_back("all");
  std::vector<std::vector<std::string>> rows;
  double total = 0;
  for (const TaskScore& t : tasks) {
    std::vector<std::string> row = {NeedleVariantName(t.task)};
    for (size_t i = 0; i < lengths.size(); ++i) {
      const double recall = i < t.summary.recall_by_length.size() ? t.summary.recall_by_length[i] : 0;
      row.push_back(fmt::format("{:.1f} % (recall {:.0f} %)", t.score_by_length[i] * 100, recall * 100));
    }
    row.push_back(fmt::format("{:.1f} %", t.score * 100));
    rows.push_back(std::move(row));
    total += t.score;
  }
  std::vector<std::string> agg = {"aggregate"};
  for (double v : AggregateByLength(tasks, lengths.size())) agg.push_back(fmt::format("{:.1f} %", v * 100));
  agg.push_back(fmt::format("{:.1f} %", tasks.empty() ? 0 : total / static_cast<double>(tasks.size()) * 100));
  rows.push_back(std::move(agg));
  page.Table(header, rows);
  page.P("Score: the share of each case's expected values found in its answer (partial credit); recall: the share "
         "of cases with every value found. The aggregate is the tasks' mean score.");
  for (const TaskScore& t : tasks) {
    page.H2(std::string("Task ") + NeedleVariantName(t.task));
    page.Raw(NeedleHeatmapSvg(t.summary, std::string("Recall: ") + NeedleVariantName(t.task)));
  }
  return page.Finish();
}

namespace {

class NeedleFormSource final : public TextSource {
 public:
  explicit NeedleFormSource(const NeedleSpec& spec) : spec_(spec), tmpl_(spec.EffectiveTemplate()) {}
  std::string Next(Rng& rng) const override {
    WordMaker words(rng);
    std::string key = words.Next(3);
    key[0] = static_cast<char>(key[0] - 'a' + 'A');  // a name, unlike any of the key pool's
    const std::string value = NeedleValue(rng, spec_.value_kind, spec_.value_digits);
    std::string out;
    const std::string& t = tmpl_.fact;
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 5, "{key}") == 0) {
        out += key;
        i += 5;
      } else if (t.compare(i, 7, "{value}") == 0) {
        out += value;
        i += 7;
      } else {
        out += t[i++];
      }
    }
    return out;
  }
  std::string Name() const override { return "needles"; }

 private:
  NeedleSpec spec_;
  NeedleTemplate tmpl_;
};

}  // namespace

std::unique_ptr<TextSource> MakeNeedleFormSource(const NeedleSpec& spec) {
  return std::make_unique<NeedleFormSource>(spec);
}

}  // namespace kvs::bench
