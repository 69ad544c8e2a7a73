// BuildAutomaton: rule bodies -> Thompson NFAs over bytes and rule calls ->
// DFAs (subset construction) -> whole-grammar analyses (productive states,
// nullable rules, left recursion, fewest bytes to finish).
#include "grammar/automaton.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <unordered_map>

#include "grammar/utf8_ranges.h"

namespace kvs::grammar {

namespace {

struct Nfa {
  struct State {
    std::vector<int32_t> eps;
    std::vector<std::pair<ByteRange, int32_t>> bytes;     // (range, target)
    std::vector<std::pair<int32_t, int32_t>> calls;       // (rule, target)
  };
  std::vector<State> states;
};

// Rules worth inlining into their callers: small and not recursive (not
// even through other rules), such as `ws` or `digit`. Inlining turns a call
// and return per character into plain DFA transitions. A "wide" rule (one
// with a class of hundreds of characters, like a JSON string's content)
// used in more than two places stays a rule: its broad states are costly to
// precompute token verdicts for (token_cache.h), so they are better shared.
std::vector<uint8_t> InlinableRules(const Grammar& g) {
  constexpr int64_t kMaxInlineSize = 256;
  constexpr uint64_t kWideClass = 256;  // code points
  const size_t num_rules = g.rules().size();
  std::vector<std::vector<int32_t>> refs(num_rules);
  std::vector<int32_t> uses(num_rules, 0);
  std::vector<uint8_t> wide(num_rules, 0);
  for (size_t r = 0; r < num_rules; ++r) {
    std::vector<int32_t> work = {g.rules()[r].body};
    while (!work.empty()) {
      const Expr& e = g.expr(work.back());
      work.pop_back();
      if (e.kind == Expr::Kind::kRuleRef) {
        refs[r].push_back(e.rule);
        ++uses[e.rule];
      }
      if (e.kind == Expr::Kind::kClass) {
        uint64_t n = 0;
        for (CharRange cr : e.ranges) n += cr.hi - cr.lo + 1;
        if (n > kWideClass) wide[r] = 1;
      }
      work.insert(work.end(), e.children.begin(), e.children.end());
    }
  }
  // Kahn's algorithm from the rules that reference nothing: a rule is
  // removed once everything it references is, so removed rules reach no cycle.
  std::vector<std::vector<int32_t>> referrers(num_rules);
  std::vector<int32_t> pending(num_rules, 0);
  for (size_t r = 0; r < num_rules; ++r) {
    for (int32_t q : refs[r]) {
      referrers[q].push_back(static_cast<int32_t>(r));
      ++pending[r];
    }
  }
  std::vector<int32_t> order;
  for (size_t r = 0; r < num_rules; ++r) {
    if (pending[r] == 0) order.push_back(static_cast<int32_t>(r));
  }
  std::vector<int64_t> rule_size(num_rules, 1);
  std::vector<uint8_t> inlinable(num_rules, 0);
  std::vector<int64_t> memo(g.exprs().size(), -1);
  std::function<int64_t(int32_t)> size_of = [&](int32_t id) -> int64_t {
    if (memo[id] >= 0) return memo[id];
    const Expr& e = g.expr(id);
    int64_t n = 1;
    switch (e.kind) {
      case Expr::Kind::kLiteral: n = static_cast<int64_t>(e.text.size()); break;
      case Expr::Kind::kClass: n = static_cast<int64_t>(e.ranges.size()) + 1; break;
      case Expr::Kind::kRuleRef: n = inlinable[e.rule] ? rule_size[e.rule] : 1; break;
      case Expr::Kind::kRepeat: n = size_of(e.children[0]) * (e.max < 0 ? e.min + 1 : e.max); break;
      default:
        for (int32_t c : e.children) n += size_of(c);
        break;
    }
    return memo[id] = std::min<int64_t>(n, int64_t{1} << 40);
  };
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t r = order[i];
    for (int32_t q : refs[r]) wide[r] |= inlinable[q] && wide[q];
    rule_size[r] = size_of(g.rules()[r].body);
    inlinable[r] = rule_size[r] <= kMaxInlineSize && r != g.root() && !(wide[r] && uses[r] > 2);
    for (int32_t p : referrers[r]) {
      if (--pending[p] == 0) order.push_back(p);
    }
  }
  return inlinable;
}

class NfaBuilder {
 public:
  NfaBuilder(const Grammar& g, const std::vector<uint8_t>& inlinable, Nfa* nfa, int64_t* total, int64_t limit)
      : g_(g), inlinable_(inlinable), nfa_(*nfa), total_(*total), limit_(limit) {}

  int32_t NewState() {
    if (++total_ > limit_) {
      if (error_.ok()) {
        error_ = ResourceExhausted("grammar too large: more than {} automaton states after expanding repetitions",
                                   limit_);
      }
      return -1;
    }
    nfa_.states.emplace_back();
    return static_cast<int32_t>(nfa_.states.size()) - 1;
  }

  // Adds the fragment for `expr` starting at state `in`; returns its end
  // state, or -1 on error (error()).
  int32_t Build(int32_t id, int32_t in) {
    if (in < 0) return -1;
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case Expr::Kind::kEmpty:
        return in;
      case Expr::Kind::kLiteral: {
        int32_t cur = in;
        for (char c : e.text) {
          const int32_t next = NewState();
          if (next < 0) return -1;
          const auto b = static_cast<uint8_t>(c);
          nfa_.states[cur].bytes.push_back({ByteRange{b, b}, next});
          cur = next;
        }
        return cur;
      }
      case Expr::Kind::kClass: {
        const int32_t out = NewState();
        if (out < 0) return -1;
        std::vector<ByteSequence> seqs;
        for (CharRange r : e.ranges) Utf8RangeSequences(r.lo, r.hi, &seqs);
        for (const ByteSequence& seq : seqs) {
          int32_t cur = in;
          for (size_t i = 0; i < seq.size(); ++i) {
            const int32_t next = i + 1 == seq.size() ? out : NewState();
            if (next < 0) return -1;
            nfa_.states[cur].bytes.push_back({seq[i], next});
            cur = next;
          }
        }
        return out;
      }
      case Expr::Kind::kRuleRef: {
        if (inlinable_[e.rule]) return Build(g_.rules()[e.rule].body, in);
        const int32_t out = NewState();
        if (out < 0) return -1;
        nfa_.states[in].calls.push_back({e.rule, out});
        return out;
      }
      case Expr::Kind::kSequence: {
        int32_t cur = in;
        for (int32_t c : e.children) cur = Build(c, cur);
        return cur;
      }
      case Expr::Kind::kChoice: {
        const int32_t out = NewState();
        for (int32_t c : e.children) {
          const int32_t start = NewState();
          if (start < 0 || out < 0) return -1;
          nfa_.states[in].eps.push_back(start);
          const int32_t end = Build(c, start);
          if (end < 0) return -1;
          nfa_.states[end].eps.push_back(out);
        }
        return out;
      }
      case Expr::Kind::kRepeat: {
        const int32_t child = e.children[0];
        int32_t cur = in;
        for (int32_t i = 0; i < e.min && cur >= 0; ++i) cur = Build(child, cur);
        if (cur < 0) return -1;
        if (e.max < 0) {
          const int32_t loop = NewState();
          if (loop < 0) return -1;
          nfa_.states[cur].eps.push_back(loop);
          const int32_t end = Build(child, loop);
          if (end < 0) return -1;
          nfa_.states[end].eps.push_back(loop);
          return loop;
        }
        if (e.max == e.min) return cur;
        const int32_t out = NewState();
        if (out < 0) return -1;
        for (int32_t i = e.min; i < e.max; ++i) {
          nfa_.states[cur].eps.push_back(out);
          cur = Build(child, cur);
          if (cur < 0) return -1;
        }
        nfa_.states[cur].eps.push_back(out);
        return out;
      }
    }
    return -1;
  }

  const Status& error() const { return error_; }

 private:
  const Grammar& g_;
  const std::vector<uint8_t>& inlinable_;
  Nfa& nfa_;
  int64_t& total_;
  int64_t limit_;
  Status error_;
};

struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// Epsilon closure of *set (sorted and unique on return).
void Closure(const Nfa& nfa, std::vector<int32_t>* set, std::vector<uint8_t>* mark) {
  std::vector<int32_t> stack = *set;
  for (int32_t s : *set) (*mark)[s] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t t : nfa.states[s].eps) {
      if (!(*mark)[t]) {
        (*mark)[t] = 1;
        set->push_back(t);
        stack.push_back(t);
      }
    }
  }
  for (int32_t s : *set) (*mark)[s] = 0;
  std::sort(set->begin(), set->end());
  set->erase(std::unique(set->begin(), set->end()), set->end());
}

struct DfaState {
  std::vector<Automaton::ByteEdge> bytes;   // targets are local ids
  std::vector<Automaton::CallEdge> calls;   // ret is a local id
  bool final = false;
};

// Subset construction for one rule's NFA (start 0, accept `accept`).
Status Determinize(const Nfa& nfa, int32_t accept, int64_t* total, const GrammarLimits& limits, int64_t* work,
                   std::vector<DfaState>* out) {
  const int64_t limit = limits.max_dfa_states;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<uint8_t> mark(nfa.states.size(), 0);
  auto intern = [&](std::vector<int32_t> set) -> int32_t {
    Closure(nfa, &set, &mark);
    auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    const int32_t id = static_cast<int32_t>(sets.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    out->emplace_back();
    ++*total;
    return id;
  };
  intern({0});
  for (size_t d = 0; d < sets.size(); ++d) {
    if (*total > limit) {
      return ResourceExhausted("grammar too complex: more than {} deterministic automaton states", limit);
    }
    const std::vector<int32_t> set = sets[d];
    *work += static_cast<int64_t>(set.size());
    if (*work > limits.max_compile_work) {
      return ResourceExhausted("grammar too complex to compile (its automaton needs more than {} steps)",
                               limits.max_compile_work);
    }
    bool final = false;
    std::vector<std::pair<ByteRange, int32_t>> edges;
    std::vector<std::pair<int32_t, int32_t>> calls;
    for (int32_t s : set) {
      final |= s == accept;
      const auto& st = nfa.states[s];
      edges.insert(edges.end(), st.bytes.begin(), st.bytes.end());
      calls.insert(calls.end(), st.calls.begin(), st.calls.end());
    }
    // Byte edges: sweep 0..255 keeping the set of NFA targets whose range
    // covers the current interval; each interval between two boundaries
    // goes to the DFA state of that set.
    std::vector<std::pair<int, int32_t>> events;  // (position, +target+1 / -(target+1))
    events.reserve(edges.size() * 2);
    for (const auto& [r, t] : edges) {
      events.push_back({r.lo, t + 1});
      events.push_back({r.hi + 1, -(t + 1)});
    }
    std::sort(events.begin(), events.end());
    *work += static_cast<int64_t>(events.size());
    std::map<int32_t, int32_t> active;  // target -> ranges covering
    std::vector<Automaton::ByteEdge> out_edges;
    for (size_t k = 0; k < events.size();) {
      const int pos = events[k].first;
      for (; k < events.size() && events[k].first == pos; ++k) {
        const int32_t t = std::abs(events[k].second) - 1;
        if (events[k].second > 0) {
          ++active[t];
        } else if (--active[t] == 0) {
          active.erase(t);
        }
      }
      if (active.empty() || k == events.size()) continue;
      const int next = events[k].first;  // the interval is [pos, next - 1]
      std::vector<int32_t> targets;
      targets.reserve(active.size());
      for (const auto& [t, n] : active) targets.push_back(t);
      const int32_t target = intern(std::move(targets));
      if (!out_edges.empty() && out_edges.back().target == target && out_edges.back().hi + 1 == pos) {
        out_edges.back().hi = static_cast<uint8_t>(next - 1);
      } else {
        out_edges.push_back({static_cast<uint8_t>(pos), static_cast<uint8_t>(next - 1), target});
      }
    }
    std::sort(calls.begin(), calls.end());
    std::vector<Automaton::CallEdge> out_calls;
    for (size_t i = 0; i < calls.size();) {
      std::vector<int32_t> targets;
      size_t j = i;
      for (; j < calls.size() && calls[j].first == calls[i].first; ++j) targets.push_back(calls[j].second);
      out_calls.push_back({calls[i].first, intern(std::move(targets))});
      i = j;
    }
    DfaState& ds = (*out)[d];
    ds.final = final;
    ds.bytes = std::move(out_edges);
    ds.calls = std::move(out_calls);
  }
  return Status::Ok();
}

}  // namespace

namespace internal {
Status AnalyzeAutomaton(const Grammar& grammar, Automaton* a);
}

StatusOr<Automaton> BuildAutomaton(const Grammar& grammar, const GrammarLimits& limits) {
  KVS_RETURN_IF_ERROR(grammar.Validate());
  Automaton a;
  const int32_t num_rules = static_cast<int32_t>(grammar.rules().size());
  a.rule_start.assign(num_rules, -1);
  a.root_rule = grammar.root();
  int64_t nfa_total = 0, dfa_total = 0, work = 0;
  const std::vector<uint8_t> inlinable = InlinableRules(grammar);
  for (int32_t r = 0; r < num_rules; ++r) {
    a.rule_names.push_back(grammar.rules()[r].name);
    if (inlinable[r]) continue;  // never called: its body is copied into callers
    Nfa nfa;
    NfaBuilder builder(grammar, inlinable, &nfa, &nfa_total, limits.max_nfa_states);
    const int32_t start = builder.NewState();
    const int32_t accept = builder.Build(grammar.rules()[r].body, start);
    if (accept < 0) return builder.error().WithContext("rule '" + grammar.rules()[r].name + "'");
    std::vector<DfaState> dfa;
    KVS_RETURN_IF_ERROR(Determinize(nfa, accept, &dfa_total, limits, &work, &dfa));
    const auto offset = static_cast<int32_t>(a.states.size());
    a.rule_start[r] = offset;
    for (const DfaState& ds : dfa) {
      Automaton::State st;
      st.rule = r;
      st.final = ds.final;
      st.byte_begin = static_cast<uint32_t>(a.byte_edges.size());
      for (Automaton::ByteEdge e : ds.bytes) {
        e.target += offset;
        a.byte_edges.push_back(e);
      }
      st.byte_end = static_cast<uint32_t>(a.byte_edges.size());
      st.call_begin = static_cast<uint32_t>(a.call_edges.size());
      for (Automaton::CallEdge c : ds.calls) {
        c.ret += offset;
        a.call_edges.push_back(c);
      }
      st.call_end = static_cast<uint32_t>(a.call_edges.size());
      a.states.push_back(st);
    }
  }
  KVS_RETURN_IF_ERROR(internal::AnalyzeAutomaton(grammar, &a));
  return a;
}

}  // namespace kvs::grammar
