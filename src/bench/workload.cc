#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace kvs::bench {

const char* ApiKindName(ApiKind a) { return a == ApiKind::kChat ? "chat" : "completions"; }

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::optional<int64_t> ParseCount(const std::string& s) {
  std::string t = s;
  int64_t scale = 1;
  if (!t.empty() && (t.back() == 'k' || t.back() == 'K')) {
    scale = 1024;
    t.pop_back();
  }
  if (t.empty() || t.size() > 12 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(t) * scale;
}

std::optional<double> ParseNumber(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

StatusOr<std::vector<std::pair<int64_t, double>>> ParseMix(const std::string& s) {
  std::vector<std::pair<int64_t, double>> out;
  for (const std::string& item : Split(s, ',')) {
    const auto parts = Split(item, ':');
    auto len = parts.empty() ? std::nullopt : ParseCount(parts[0]);
    auto w = parts.size() == 2 ? ParseNumber(parts[1]) : std::nullopt;
    if (parts.size() != 2 || !len || *len <= 0 || !w || *w <= 0) {
      return InvalidArgument("bad mix item '{}' in '{}': expected LENGTH:WEIGHT, e.g. 256:0.8,4096:0.2", item, s);
    }
    out.emplace_back(*len, *w);
  }
  return out;
}

StatusOr<MultiTurnSpec> ParseMultiTurn(const std::string& s) {
  const auto parts = Split(s, ':');
  MultiTurnSpec m;
  auto bad = [&] {
    return InvalidArgument("bad multi-turn spec '{}': expected CONVERSATIONS:TURNS[:SYSTEM_TOKENS], e.g. 4:3:512", s);
  };
  if (parts.size() < 2 || parts.size() > 3) return bad();
  auto c = ParseCount(parts[0]);
  auto t = ParseCount(parts[1]);
  if (!c || !t || *c <= 0 || *t <= 0 || *c > 100000 || *t > 1000) return bad();
  m.conversations = static_cast<int>(*c);
  m.turns = static_cast<int>(*t);
  if (parts.size() == 3) {
    auto sys = ParseCount(parts[2]);
    if (!sys) return bad();
    m.system_tokens = *sys;
  }
  return m;
}

StatusOr<std::vector<int64_t>> ParseLengths(const std::string& text, int64_t max) {
  std::string s = text;
  if (const size_t m = s.find("max"); m != std::string::npos) {
    if (max <= 0) {
      return InvalidArgument("input lengths '{}': 'max' needs the endpoint's context length, which it does not give",
                             text);
    }
    s.replace(m, 3, std::to_string(max));
  }
  std::vector<int64_t> out;
  if (s.find(':') != std::string::npos) {
    const auto parts = Split(s, ':');
    auto a = parts.size() == 2 ? ParseCount(parts[0]) : std::nullopt;
    auto b = parts.size() == 2 ? ParseCount(parts[1]) : std::nullopt;
    if (!a || !b || *a <= 0 || *b < *a) {
      return InvalidArgument("bad length range '{}': expected FROM:TO (doubling), e.g. 512:8192", s);
    }
    for (int64_t v = *a; v < *b; v *= 2) out.push_back(v);
    out.push_back(*b);
    return out;
  }
  for (const std::string& item : Split(s, ',')) {
    auto v = ParseCount(item);
    if (!v || *v <= 0) return InvalidArgument("bad length '{}' in '{}'", item, s);
    out.push_back(*v);
  }
  return out;
}

std::string WorkloadSpec::Describe() const {
  std::string s = fmt::format("{} API, ", ApiKindName(api));
  if (!rates.empty()) {
    s += fmt::format("Poisson rates {} req/s", fmt::join(rates, ","));
  } else {
    s += fmt::format("concurrency {}", concurrency.empty() ? "1" : fmt::format("{}", fmt::join(concurrency, ",")));
  }
  if (multi_turn.conversations > 0) {
    s += fmt::format(", {} conversations x {} turns of {} tokens (shared system prompt {} tokens)",
                     multi_turn.conversations, multi_turn.turns, input_len, multi_turn.system_tokens);
  } else if (!mix.empty()) {
    std::vector<std::string> items;
    for (auto [l, w] : mix) items.push_back(fmt::format("{}:{}", l, w));
    s += fmt::format(", input mix {}", fmt::join(items, ","));
  } else if (!input_lengths.empty()) {
    s += fmt::format(", input lengths {}", fmt::join(input_lengths, ","));
  } else {
    s += fmt::format(", input {} tokens", input_len);
  }
  s += fmt::format(", output {} tokens", output_len);
  if (input_stddev > 0 || output_stddev > 0) s += fmt::format(" (stddev in {}, out {})", input_stddev, output_stddev);
  if (!dataset.empty()) s += fmt::format(", dataset {}", dataset);
  if (burstiness != 1) s += fmt::format(", burstiness {:g}", burstiness);
  if (ramp_up_seconds > 0) s += fmt::format(", ramp-up {:g} s", ramp_up_seconds);
  if (!probes.empty()) s += fmt::format(", probes {}", FormatProbes(probes));
  return s;
}

nlohmann::json WorkloadSpec::ToJson() const {
  nlohmann::json j;
  j["name"] = name;
  j["api"] = ApiKindName(api);
  j["concurrency"] = concurrency;
  j["rates"] = rates;
  j["max_concurrency"] = max_concurrency;
  j["num_requests"] = num_requests;
  j["duration_seconds"] = duration_seconds;
  j["input_lengths"] = input_lengths;
  if (!input_lengths_text.empty()) j["input_lengths_text"] = input_lengths_text;
  j["input_len"] = input_len;
  j["output_len"] = output_len;
  nlohmann::json m = nlohmann::json::array();
  for (auto [l, w] : mix) m.push_back({{"input_len", l}, {"weight", w}});
  j["mix"] = m;
  j["multi_turn"] = {{"conversations", multi_turn.conversations},
                     {"turns", multi_turn.turns},
                     {"system_tokens", multi_turn.system_tokens}};
  j["ignore_eos"] = ignore_eos;
  j["text"] = text;
  j["seed"] = seed;
  j["probes"] = FormatProbes(probes);
  j["input_stddev"] = input_stddev;
  j["output_stddev"] = output_stddev;
  j["burstiness"] = burstiness;
  j["ramp_up_seconds"] = ramp_up_seconds;
  j["dataset"] = dataset;
  return j;
}

Status ResolveLengths(WorkloadSpec* spec, std::optional<int64_t> context) {
  if (spec->input_lengths_text.empty()) return Status::Ok();
  const int64_t max = context ? std::max<int64_t>(*context - spec->output_len, 1) : 0;
  KVS_ASSIGN_OR_RETURN(spec->input_lengths, ParseLengths(spec->input_lengths_text, max));
  spec->input_lengths_text.clear();
  return Status::Ok();
}

Status ValidateSpec(const WorkloadSpec& s) {
  if (!s.concurrency.empty() && !s.rates.empty()) {
    return InvalidArgument("give either concurrency (closed loop) or rate (Poisson arrivals), not both");
  }
  for (int c : s.concurrency) {
    if (c < 1 || c > 100000) return InvalidArgument("concurrency {} is out of range [1, 100000]", c);
  }
  for (double r : s.rates) {
    if (!(r > 0) || r > 1e6) return InvalidArgument("rate {} is out of range (0, 1e6] requests/s", r);
  }
  if (s.max_concurrency < 0) return InvalidArgument("max-concurrency must be >= 0");
  if (s.num_requests < 0 || s.num_requests > 10000000) return InvalidArgument("num-requests is out of range");
  if (s.duration_seconds < 0) return InvalidArgument("duration must be >= 0");
  if (s.output_len < 1 || s.output_len > 10000000) return InvalidArgument("output-len must be >= 1");
  if (s.input_len < 1) return InvalidArgument("input-len must be >= 1");
  for (int64_t l : s.input_lengths) {
    if (l < 1) return InvalidArgument("input lengths must be >= 1");
  }
  const bool sweep = !s.input_lengths.empty() || !s.input_lengths_text.empty();
  const int shapes = sweep + (!s.mix.empty()) + (s.multi_turn.conversations > 0);
  if (shapes > 1) return InvalidArgument("input-lengths, mix and multi-turn are alternatives: give one of them");
  if (s.multi_turn.conversations > 0 && s.api != ApiKind::kChat) {
    return InvalidArgument("multi-turn conversations need the chat API (api: chat, --api chat)");
  }
  if (s.input_stddev < 0 || s.output_stddev < 0) return InvalidArgument("input-stddev and output-stddev must be >= 0");
  if (!(s.burstiness > 0) || s.burstiness > 1000) return InvalidArgument("burstiness must be in (0, 1000]");
  if (s.ramp_up_seconds < 0) return InvalidArgument("ramp-up must be >= 0 seconds");
  if (s.ramp_up_seconds > 0 && s.rates.empty()) {
    return InvalidArgument("ramp-up raises a request rate: give --rate (Poisson arrivals) with it");
  }
  if (!s.dataset.empty() && (shapes > 0)) {
    return InvalidArgument("a dataset gives the prompts: leave out input-lengths, mix and multi-turn");
  }
  for (auto& [kind, share] : s.probes) {
    if (kind == ProbeKind::kRecall && s.multi_turn.conversations > 0 && s.multi_turn.turns < 2) {
      return InvalidArgument(
          "recall probes in conversations state a fact in the first turn and ask for it in the last: they need "
          "two or more turns (--multi-turn 4:3)");
    }
    if (kind != ProbeKind::kRecall && s.multi_turn.conversations > 0) {
      return InvalidArgument("multi-turn runs carry recall probes only; put {} probes in a run of their own",
                             ProbeKindName(kind));
    }
  }
  return Status::Ok();
}

namespace {

// Draws each request's probe kind (recall: each conversation's) by the
// shares, from a generator of its own so that the rest of the plan is the
// same with and without probes.
void AssignProbes(RunPlan* p) {
  if (p->probes.empty()) return;
  std::mt19937_64 rng(p->seed * 0xD1B54A32D192ED03ull + 7);
  std::uniform_real_distribution<double> u(0, 1);
  auto draw = [&]() {
    double x = u(rng);
    for (auto& [kind, share] : p->probes) {
      if (x < share) return kind;
      x -= share;
    }
    return ProbeKind::kNone;
  };
  if (p->multi_turn.conversations > 0) {
    for (size_t i = 0; i < p->requests.size(); ++i) {
      PlannedRequest& r = p->requests[i];
      if (r.turn != 0) continue;
      const ProbeKind k = draw();
      const size_t last = i + static_cast<size_t>(p->multi_turn.turns) - 1;
      if (k != ProbeKind::kNone && last < p->requests.size()) p->requests[last].probe = k;
    }
    return;
  }
  for (PlannedRequest& r : p->requests) r.probe = draw();
}

}  // namespace

StatusOr<std::vector<RunPlan>> ExpandRuns(const WorkloadSpec& unresolved) {
  WorkloadSpec spec = unresolved;
  KVS_RETURN_IF_ERROR(ResolveLengths(&spec, std::nullopt));
  KVS_RETURN_IF_ERROR(ValidateSpec(spec));
  std::vector<int64_t> lengths = spec.input_lengths;
  if (lengths.empty()) lengths.push_back(spec.mix.empty() ? spec.input_len : 0);
  std::vector<std::pair<int, double>> arrivals;  // (concurrency, rate)
  for (double r : spec.rates) arrivals.emplace_back(0, r);
  for (int c : spec.concurrency) arrivals.emplace_back(c, 0.0);
  if (arrivals.empty()) arrivals.emplace_back(1, 0.0);
  std::shared_ptr<const Dataset> dataset;
  if (!spec.dataset.empty()) {
    KVS_ASSIGN_OR_RETURN(Dataset d, LoadDataset(spec.dataset));
    dataset = std::make_shared<const Dataset>(std::move(d));
  }
  std::vector<RunPlan> runs;
  uint64_t run_seed = spec.seed;
  for (int64_t len : lengths) {
    for (auto [conc, rate] : arrivals) {
      RunPlan p;
      p.api = spec.api;
      p.concurrency = conc;
      p.rate = rate;
      p.max_concurrency = spec.max_concurrency;
      p.duration_seconds = spec.duration_seconds;
      p.input_len = len;
      p.output_len = spec.output_len;
      p.ignore_eos = spec.ignore_eos;
      p.multi_turn = spec.multi_turn;
      p.text = spec.text;
      p.seed = run_seed++;
      p.probes = spec.probes;
      p.burstiness = spec.burstiness;
      p.ramp_up_seconds = spec.ramp_up_seconds;
      p.dataset = dataset;
      p.trace = dataset && dataset->timed;
      std::string label = rate > 0 ? fmt::format("rate={:g}/s", rate) : fmt::format("c={}", conc);
      if (p.trace) label = "trace";
      if (dataset) {
        label += fmt::format(" dataset={}", dataset->path.substr(dataset->path.find_last_of('/') + 1));
      } else if (spec.multi_turn.conversations > 0) {
        label += fmt::format(" conv={}x{}", spec.multi_turn.conversations, spec.multi_turn.turns);
      } else if (len > 0) {
        label += fmt::format(" in={}", len);
      } else {
        label += " mix";
      }
      label += fmt::format(" out={}", spec.output_len);
      p.name = spec.name.empty() ? label : spec.name + " " + label;

      std::mt19937_64 rng(p.seed * 0x9E3779B97F4A7C15ull + 1);
      int64_t n = spec.num_requests;
      if (spec.multi_turn.conversations > 0) {
        n = static_cast<int64_t>(spec.multi_turn.conversations) * spec.multi_turn.turns;
      } else if (n == 0 && dataset) {
        n = static_cast<int64_t>(dataset->entries.size());
      } else if (n == 0) {
        n = rate > 0 && spec.duration_seconds > 0
                ? static_cast<int64_t>(std::ceil(rate * spec.duration_seconds))
                : std::max<int64_t>(16, 4 * static_cast<int64_t>(std::max(conc, 1)));
      }
      std::discrete_distribution<size_t> pick_len;
      if (!spec.mix.empty()) {
        std::vector<double> w;
        for (auto& [l, x] : spec.mix) w.push_back(x);
        pick_len = std::discrete_distribution<size_t>(w.begin(), w.end());
      }
      // Arrivals: unit-mean gamma steps (shape = burstiness; 1 is
      // exponential) of the integrated rate Lambda(t), mapped back to time.
      // Lambda(t) = rate t for a constant rate; with a ramp-up of S seconds
      // rate t^2 / (2S) until S, then rate S / 2 + rate (t - S).
      std::gamma_distribution<double> step(spec.burstiness, 1.0 / spec.burstiness);
      double lambda = 0;
      const double r = rate;  // a copy: lambdas may not capture structured bindings (clang 14)
      auto next_arrival = [&]() {
        lambda += step(rng);
        const double S = spec.ramp_up_seconds;
        if (S <= 0) return lambda / r;
        if (lambda <= r * S / 2) return std::sqrt(2 * S * lambda / r);
        return S + (lambda - r * S / 2) / r;
      };
      auto draw_len = [&](int64_t mean, int64_t sd) {
        if (sd <= 0) return mean;
        std::normal_distribution<double> d(static_cast<double>(mean), static_cast<double>(sd));
        return std::clamp<int64_t>(std::llround(d(rng)), 1, std::max<int64_t>(4 * mean, 1));
      };
      double t = 0;
      if (spec.multi_turn.conversations > 0) {
        // Conversation-major order: the runner sends a conversation's turns
        // one after another; conversations start by the arrival process.
        int64_t idx = 0;
        for (int c = 0; c < spec.multi_turn.conversations; ++c) {
          if (rate > 0 && c > 0) t = next_arrival();
          for (int turn = 0; turn < spec.multi_turn.turns; ++turn) {
            PlannedRequest r;
            r.index = idx++;
            r.input_tokens = spec.input_len;
            r.output_tokens = spec.output_len;
            r.arrival = rate > 0 ? t : 0;
            r.conversation = c;
            r.turn = turn;
            p.requests.push_back(r);
          }
        }
      } else {
        // A Poisson run given only a duration: the arrivals that fall
        // inside it (their number is itself random, mean rate x duration).
        const bool by_time = rate > 0 && spec.duration_seconds > 0 && spec.num_requests == 0 && !dataset;
        for (int64_t i = 0; by_time ? i < 10000000 : i < n; ++i) {
          if (rate > 0 && (i > 0 || spec.ramp_up_seconds > 0)) t = next_arrival();
          if (by_time && t >= spec.duration_seconds) break;
          PlannedRequest r;
          r.index = i;
          r.input_tokens = draw_len(spec.mix.empty() ? len : spec.mix[pick_len(rng)].first, spec.input_stddev);
          r.output_tokens = draw_len(spec.output_len, spec.output_stddev);
          r.arrival = rate > 0 ? t : 0;
          if (dataset) {
            // Entries in order, again from the first when the run wants more.
            const size_t m = dataset->entries.size();
            const DatasetEntry& e = dataset->entries[static_cast<size_t>(i) % m];
            r.dataset_index = static_cast<int64_t>(static_cast<size_t>(i) % m);
            r.input_tokens = e.input_length.value_or(0);  // 0: the prompt's own count
            if (e.output_length) r.output_tokens = *e.output_length;
            if (p.trace) {
              const double first = *dataset->entries.front().timestamp;
              const double span = *dataset->entries.back().timestamp - first + 1;
              r.arrival = *e.timestamp - first + static_cast<double>(static_cast<size_t>(i) / m) * span;
            }
          }
          p.requests.push_back(r);
        }
      }
      AssignProbes(&p);
      runs.push_back(std::move(p));
    }
  }
  return runs;
}

nlohmann::json RunPlan::ToJson() const {
  nlohmann::json j;
  j["name"] = name;
  j["api"] = ApiKindName(api);
  j["arrival"] = rate > 0 ? "poisson" : "concurrency";
  j["concurrency"] = concurrency;
  j["rate"] = rate;
  j["max_concurrency"] = max_concurrency;
  j["duration_seconds"] = duration_seconds;
  j["input_len"] = input_len;
  j["output_len"] = output_len;
  j["ignore_eos"] = ignore_eos;
  j["multi_turn"] = {{"conversations", multi_turn.conversations},
                     {"turns", multi_turn.turns},
                     {"system_tokens", multi_turn.system_tokens}};
  j["text"] = text;
  j["seed"] = seed;
  j["probes"] = FormatProbes(probes);
  j["burstiness"] = burstiness;
  j["ramp_up_seconds"] = ramp_up_seconds;
  j["dataset"] = dataset ? nlohmann::json(dataset->path) : nlohmann::json(nullptr);
  if (trace) j["arrival"] = "trace";
  j["num_requests"] = requests.size();
  return j;
}

// --- YAML ---------------------------------------------------------------------

namespace {

std::string NormKey(std::string k) {
  std::replace(k.begin(), k.end(), '_', '-');
  return k;
}

std::string Scalar(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); }

// A scalar or a sequence of scalars as one comma-separated string.
StatusOr<std::string> ScalarOrList(const YAML::Node& n, const std::string& key) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) {
    std::string s;
    for (const auto& e : n) {
      if (!e.IsScalar()) return InvalidArgument("{}: expected a list of numbers", key);
      if (!s.empty()) s += ",";
      s += e.Scalar();
    }
    return s;
  }
  return InvalidArgument("{}: expected a number or a list of numbers", key);
}

// A mapping {A: x, B: y} as the flag's text "A:x,B:y"; a scalar as it is.
std::string PairsText(const YAML::Node& v) {
  if (!v.IsMap()) return Scalar(v);
  std::string text;
  for (const auto& kv : v) {
    if (!text.empty()) text += ",";
    text += kv.first.Scalar() + ":" + Scalar(kv.second);
  }
  return text;
}

Status ApplyKey(const std::string& raw_key, const YAML::Node& v, WorkloadSpec* s) {
  const std::string key = NormKey(raw_key);
  auto num = [&](double* out) -> Status {
    auto x = ParseNumber(Scalar(v));
    if (!x) return InvalidArgument("{}: expected a number, got '{}'", raw_key, Scalar(v));
    *out = *x;
    return Status::Ok();
  };
  auto integer = [&](int64_t* out) -> Status {
    auto x = ParseCount(Scalar(v));
    if (!x) return InvalidArgument("{}: expected a non-negative integer, got '{}'", raw_key, Scalar(v));
    *out = *x;
    return Status::Ok();
  };
  if (key == "name") {
    s->name = Scalar(v);
  } else if (key == "api") {
    const std::string a = Scalar(v);
    if (a == "chat") {
      s->api = ApiKind::kChat;
    } else if (a == "completions") {
      s->api = ApiKind::kCompletions;
    } else {
      return InvalidArgument("api: expected 'completions' or 'chat', got '{}'", a);
    }
  } else if (key == "concurrency") {
    KVS_ASSIGN_OR_RETURN(std::string list, ScalarOrList(v, raw_key));
    s->concurrency.clear();
    for (const std::string& item : Split(list, ',')) {
      auto c = ParseCount(item);
      if (!c || *c < 1 || *c > 100000) return InvalidArgument("concurrency: bad value '{}'", item);
      s->concurrency.push_back(static_cast<int>(*c));
    }
  } else if (key == "rate" || key == "rates") {
    KVS_ASSIGN_OR_RETURN(std::string list, ScalarOrList(v, raw_key));
    s->rates.clear();
    for (const std::string& item : Split(list, ',')) {
      auto r = ParseNumber(item);
      if (!r || *r <= 0) return InvalidArgument("rate: bad value '{}'", item);
      s->rates.push_back(*r);
    }
  } else if (key == "max-concurrency") {
    int64_t x = 0;
    KVS_RETURN_IF_ERROR(integer(&x));
    s->max_concurrency = static_cast<int>(x);
  } else if (key == "num-requests") {
    KVS_RETURN_IF_ERROR(integer(&s->num_requests));
  } else if (key == "duration") {
    KVS_RETURN_IF_ERROR(num(&s->duration_seconds));
  } else if (key == "input-len") {
    KVS_RETURN_IF_ERROR(integer(&s->input_len));
  } else if (key == "input-lengths") {
    KVS_ASSIGN_OR_RETURN(std::string list, ScalarOrList(v, raw_key));
    s->input_lengths.clear();
    s->input_lengths_text.clear();
    if (list.find("max") != std::string::npos) {
      s->input_lengths_text = list;  // resolved against the endpoint's context
    } else {
      KVS_ASSIGN_OR_RETURN(s->input_lengths, ParseLengths(list));
    }
  } else if (key == "output-len") {
    KVS_RETURN_IF_ERROR(integer(&s->output_len));
  } else if (key == "mix") {
    KVS_ASSIGN_OR_RETURN(s->mix, ParseMix(PairsText(v)));
  } else if (key == "multi-turn") {
    s->api = ApiKind::kChat;  // conversations are chat requests
    if (v.IsMap()) {
      MultiTurnSpec m;
      for (const auto& kv : v) {
        const std::string k = NormKey(kv.first.Scalar());
        auto x = ParseCount(Scalar(kv.second));
        if (!x) return InvalidArgument("multi-turn.{}: expected a non-negative integer", kv.first.Scalar());
        if (k == "conversations") {
          m.conversations = static_cast<int>(*x);
        } else if (k == "turns") {
          m.turns = static_cast<int>(*x);
        } else if (k == "system-tokens" || k == "system-len") {
          m.system_tokens = *x;
        } else {
          return InvalidArgument("multi-turn: unknown key '{}' (conversations, turns, system_tokens)",
                                 kv.first.Scalar());
        }
      }
      if (m.conversations < 1 || m.turns < 1) {
        return InvalidArgument("multi-turn: conversations and turns must be >= 1");
      }
      s->multi_turn = m;
    } else {
      KVS_ASSIGN_OR_RETURN(s->multi_turn, ParseMultiTurn(Scalar(v)));
    }
  } else if (key == "ignore-eos") {
    const std::string b = Scalar(v);
    if (b != "true" && b != "false") return InvalidArgument("ignore-eos: expected true or false");
    s->ignore_eos = b == "true";
  } else if (key == "text") {
    s->text = Scalar(v);
  } else if (key == "probes") {
    KVS_ASSIGN_OR_RETURN(s->probes, ParseProbes(PairsText(v)));
  } else if (key == "input-stddev") {
    KVS_RETURN_IF_ERROR(integer(&s->input_stddev));
  } else if (key == "output-stddev") {
    KVS_RETURN_IF_ERROR(integer(&s->output_stddev));
  } else if (key == "burstiness") {
    KVS_RETURN_IF_ERROR(num(&s->burstiness));
  } else if (key == "ramp-up") {
    KVS_RETURN_IF_ERROR(num(&s->ramp_up_seconds));
  } else if (key == "dataset") {
    s->dataset = Scalar(v);
  } else if (key == "seed") {
    int64_t x = 0;
    KVS_RETURN_IF_ERROR(integer(&x));
    s->seed = static_cast<uint64_t>(x);
  } else {
    return InvalidArgument(
        "unknown key '{}' (known: name, api, concurrency, rate, max-concurrency, num-requests, duration, input-len, "
        "input-lengths, output-len, mix, multi-turn, ignore-eos, text, seed, probes, input-stddev, output-stddev, "
        "burstiness, ramp-up, dataset, slo, runs)",
        raw_key);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<WorkloadFile> ParseWorkloadYaml(const std::string& yaml, const WorkloadSpec& defaults) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("workload file: {}", e.what());
  }
  if (!root.IsMap()) return InvalidArgument("workload file: expected a mapping of settings at the top level");
  WorkloadFile f;
  WorkloadSpec base = defaults;
  YAML::Node runs;
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key == "runs") {
      runs = kv.second;
      continue;
    }
    if (NormKey(key) == "slo") {
      KVS_ASSIGN_OR_RETURN(std::string list, ScalarOrList(kv.second, key));
      for (const std::string& item : Split(list, ',')) f.slos.push_back(item);
      continue;
    }
    if (Status st = ApplyKey(key, kv.second, &base); !st.ok()) return st.WithContext("workload file");
  }
  if (runs && !runs.IsNull()) {
    if (!runs.IsSequence()) return InvalidArgument("workload file: runs: expected a list of settings");
    int i = 0;
    for (const auto& entry : runs) {
      if (!entry.IsMap()) return InvalidArgument("workload file: runs[{}]: expected a mapping", i);
      WorkloadSpec s = base;
      for (const auto& kv : entry) {
        if (Status st = ApplyKey(kv.first.Scalar(), kv.second, &s); !st.ok()) {
          return st.WithContext(fmt::format("workload file: runs[{}]", i));
        }
      }
      if (Status st = ValidateSpec(s); !st.ok()) return st.WithContext(fmt::format("workload file: runs[{}]", i));
      f.specs.push_back(std::move(s));
      ++i;
    }
  } else {
    if (Status st = ValidateSpec(base); !st.ok()) return st.WithContext("workload file");
    f.specs.push_back(base);
  }
  return f;
}

StatusOr<WorkloadFile> LoadWorkloadFile(const std::string& path, const WorkloadSpec& defaults) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read the workload file {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto f = ParseWorkloadYaml(ss.str(), defaults);
  if (!f.ok()) return f.status().WithContext(path);
  return f;
}

}  // namespace kvs::bench
