// Whole-grammar analyses over the per-rule DFAs: which states can finish
// (productive), trimming the others, nullable rules, left recursion, and the
// fewest bytes that finish each state (Knuth's generalisation of Dijkstra's
// algorithm to grammars).
#include <algorithm>
#include <functional>
#include <queue>

#include "grammar/automaton.h"

namespace kvs::grammar::internal {

namespace {

struct Preds {
  std::vector<std::vector<int32_t>> by_byte;                  // [target] sources
  std::vector<std::vector<std::pair<int32_t, int32_t>>> by_ret;  // [ret] (source, rule)
  std::vector<std::vector<std::pair<int32_t, int32_t>>> callers; // [rule] (source, ret)
};

Preds BuildPreds(const Automaton& a) {
  Preds p;
  p.by_byte.resize(a.states.size());
  p.by_ret.resize(a.states.size());
  p.callers.resize(a.rule_start.size());
  for (int32_t s = 0; s < a.num_states(); ++s) {
    const auto& st = a.states[s];
    for (uint32_t i = st.byte_begin; i < st.byte_end; ++i) {
      auto& v = p.by_byte[a.byte_edges[i].target];
      if (v.empty() || v.back() != s) v.push_back(s);
    }
    for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
      const auto& c = a.call_edges[i];
      p.by_ret[c.ret].push_back({s, c.rule});
      p.callers[c.rule].push_back({s, c.ret});
    }
  }
  return p;
}

// Fixed point "state s reaches a final state of its rule" where a call on
// rule R may be crossed when rule_ok[R]; rule_ok[R] becomes true when R's
// start qualifies. allow_bytes: byte edges may be crossed too. Returns the
// per-state result; fills *rule_ok.
std::vector<uint8_t> ReachFinal(const Automaton& a, const Preds& p, bool allow_bytes, std::vector<uint8_t>* rule_ok) {
  std::vector<uint8_t> ok(a.states.size(), 0);
  rule_ok->assign(a.rule_start.size(), 0);
  std::vector<int32_t> work;
  auto mark = [&](int32_t s) {
    if (!ok[s]) {
      ok[s] = 1;
      work.push_back(s);
    }
  };
  for (int32_t s = 0; s < a.num_states(); ++s) {
    if (a.states[s].final) mark(s);
  }
  while (!work.empty()) {
    const int32_t x = work.back();
    work.pop_back();
    if (allow_bytes) {
      for (int32_t s : p.by_byte[x]) mark(s);
    }
    for (auto [s, r] : p.by_ret[x]) {
      if ((*rule_ok)[r]) mark(s);
    }
    const int32_t r = a.states[x].rule;
    if (a.rule_start[r] == x && !(*rule_ok)[r]) {
      (*rule_ok)[r] = 1;
      for (auto [s, ret] : p.callers[r]) {
        if (ok[ret]) mark(s);
      }
    }
  }
  return ok;
}

// Keeps only states with keep[s]; drops edges into removed states or rules.
void Trim(const std::vector<uint8_t>& keep, const std::vector<uint8_t>& rule_keep, Automaton* a) {
  std::vector<int32_t> remap(a->states.size(), -1);
  int32_t n = 0;
  for (int32_t s = 0; s < a->num_states(); ++s) {
    if (keep[s]) remap[s] = n++;
  }
  Automaton out;
  out.rule_names = a->rule_names;
  out.root_rule = a->root_rule;
  out.rule_start.assign(a->rule_start.size(), -1);
  for (size_t r = 0; r < a->rule_start.size(); ++r) {
    if (rule_keep[r] && a->rule_start[r] >= 0) out.rule_start[r] = remap[a->rule_start[r]];
  }
  for (int32_t s = 0; s < a->num_states(); ++s) {
    if (!keep[s]) continue;
    const auto& st = a->states[s];
    Automaton::State ns;
    ns.rule = st.rule;
    ns.final = st.final;
    ns.byte_begin = static_cast<uint32_t>(out.byte_edges.size());
    for (uint32_t i = st.byte_begin; i < st.byte_end; ++i) {
      Automaton::ByteEdge e = a->byte_edges[i];
      if (remap[e.target] < 0) continue;
      e.target = remap[e.target];
      out.byte_edges.push_back(e);
    }
    ns.byte_end = static_cast<uint32_t>(out.byte_edges.size());
    ns.call_begin = static_cast<uint32_t>(out.call_edges.size());
    for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
      Automaton::CallEdge c = a->call_edges[i];
      if (!rule_keep[c.rule] || remap[c.ret] < 0) continue;
      c.ret = remap[c.ret];
      out.call_edges.push_back(c);
    }
    ns.call_end = static_cast<uint32_t>(out.call_edges.size());
    out.states.push_back(ns);
  }
  *a = std::move(out);
}

// Rules reachable from the root (through any edge).
std::vector<uint8_t> ReachableRules(const Automaton& a) {
  std::vector<uint8_t> rule_seen(a.rule_start.size(), 0), seen(a.states.size(), 0);
  std::vector<int32_t> work;
  auto visit_rule = [&](int32_t r) {
    if (rule_seen[r]) return;
    rule_seen[r] = 1;
    if (a.rule_start[r] >= 0 && !seen[a.rule_start[r]]) {
      seen[a.rule_start[r]] = 1;
      work.push_back(a.rule_start[r]);
    }
  };
  visit_rule(a.root_rule);
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    const auto& st = a.states[s];
    auto visit = [&](int32_t t) {
      if (!seen[t]) {
        seen[t] = 1;
        work.push_back(t);
      }
    };
    for (uint32_t i = st.byte_begin; i < st.byte_end; ++i) visit(a.byte_edges[i].target);
    for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
      visit_rule(a.call_edges[i].rule);
      visit(a.call_edges[i].ret);
    }
  }
  return rule_seen;
}

Status CheckLeftRecursion(const Automaton& a, const std::vector<uint8_t>& nullable) {
  const size_t num_rules = a.rule_start.size();
  // left[R]: rules R may call before consuming any byte.
  std::vector<std::vector<int32_t>> left(num_rules);
  std::vector<int32_t> seen_stamp(a.states.size(), -1);
  for (size_t r = 0; r < num_rules; ++r) {
    if (a.rule_start[r] < 0) continue;
    std::vector<int32_t> work = {a.rule_start[r]};
    seen_stamp[a.rule_start[r]] = static_cast<int32_t>(r);
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      const auto& st = a.states[s];
      for (uint32_t i = st.call_begin; i < st.call_end; ++i) {
        const auto& c = a.call_edges[i];
        left[r].push_back(c.rule);
        if (nullable[c.rule] && seen_stamp[c.ret] != static_cast<int32_t>(r)) {
          seen_stamp[c.ret] = static_cast<int32_t>(r);
          work.push_back(c.ret);
        }
      }
    }
  }
  // Cycle search (iterative DFS with colours), reporting the cycle's path.
  std::vector<uint8_t> colour(num_rules, 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<int32_t, size_t>> stack;
  for (size_t root = 0; root < num_rules; ++root) {
    if (colour[root]) continue;
    stack.push_back({static_cast<int32_t>(root), 0});
    colour[root] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      if (next == left[r].size()) {
        colour[r] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t q = left[r][next++];
      if (colour[q] == 1) {
        std::string path;
        size_t i = 0;
        while (stack[i].first != q) ++i;
        for (; i < stack.size(); ++i) path += a.rule_names[stack[i].first] + " -> ";
        path += a.rule_names[q];
        return InvalidArgument(
            "left recursion: rule '{}' can reach itself without consuming input ({}); rewrite it with repetition",
            a.rule_names[q], path);
      }
      if (colour[q] == 0) {
        colour[q] = 1;
        stack.push_back({q, 0});
      }
    }
  }
  return Status::Ok();
}

void ComputeMinBytes(Automaton* a, const Preds& p) {
  constexpr int32_t kInf = INT32_MAX / 4;
  a->min_bytes.assign(a->states.size(), kInf);
  a->rule_min_bytes.assign(a->rule_start.size(), kInf);
  std::vector<uint8_t> done(a->states.size(), 0), rule_done(a->rule_start.size(), 0);
  using Item = std::pair<int32_t, int32_t>;  // (dist, state)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  auto relax = [&](int32_t s, int32_t d) {
    if (d < a->min_bytes[s]) {
      a->min_bytes[s] = d;
      heap.push({d, s});
    }
  };
  for (int32_t s = 0; s < a->num_states(); ++s) {
    if (a->states[s].final) relax(s, 0);
  }
  while (!heap.empty()) {
    const auto [d, x] = heap.top();
    heap.pop();
    if (done[x] || d != a->min_bytes[x]) continue;
    done[x] = 1;
    for (int32_t s : p.by_byte[x]) relax(s, d + 1);
    for (auto [s, r] : p.by_ret[x]) {
      if (rule_done[r]) relax(s, a->rule_min_bytes[r] + d);
    }
    const int32_t r = a->states[x].rule;
    if (a->rule_start[r] == x && !rule_done[r]) {
      rule_done[r] = 1;
      a->rule_min_bytes[r] = d;
      for (auto [s, ret] : p.callers[r]) {
        if (done[ret]) relax(s, d + a->min_bytes[ret]);
      }
    }
  }
}

void ComputeFollow(Automaton* a, const Preds& p) {
  const size_t num_rules = a->rule_start.size();
  a->follow.assign(num_rules, {});
  a->follow_complete.assign(num_rules, 1);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < num_rules; ++r) {
      if (!a->follow_complete[r]) continue;
      std::vector<int32_t> f = a->follow[r];
      bool complete = true;
      for (auto [site, ret] : p.callers[r]) {
        const Automaton::State& st = a->states[ret];
        if (st.has_bytes() || st.call_end > st.call_begin) f.push_back(ret);
        if (st.final) {
          if (!a->follow_complete[st.rule]) complete = false;
          f.insert(f.end(), a->follow[st.rule].begin(), a->follow[st.rule].end());
        }
      }
      std::sort(f.begin(), f.end());
      f.erase(std::unique(f.begin(), f.end()), f.end());
      if (!complete || f.size() > Automaton::kMaxFollowStates) {
        a->follow_complete[r] = 0;
        a->follow[r].clear();
        changed = true;
      } else if (f != a->follow[r]) {
        a->follow[r] = std::move(f);
        changed = true;
      }
    }
  }
}

}  // namespace

Status AnalyzeAutomaton(const Grammar& grammar, Automaton* a) {
  (void)grammar;
  Preds preds = BuildPreds(*a);
  std::vector<uint8_t> productive_rule;
  const std::vector<uint8_t> productive = ReachFinal(*a, preds, /*allow_bytes=*/true, &productive_rule);
  const std::vector<uint8_t> reachable = ReachableRules(*a);
  // Name a rule other than root when one is to blame (root then fails too).
  for (size_t r = 0; r < a->rule_start.size(); ++r) {
    if (reachable[r] && !productive_rule[r] && static_cast<int32_t>(r) != a->root_rule) {
      return InvalidArgument("rule '{}' can never finish (every alternative needs the rule itself or matches nothing)",
                             a->rule_names[r]);
    }
  }
  if (!productive_rule[a->root_rule]) {
    return InvalidArgument("the grammar matches nothing: rule 'root' can never finish");
  }
  Trim(productive, productive_rule, a);
  preds = BuildPreds(*a);
  std::vector<uint8_t> nullable;
  (void)ReachFinal(*a, preds, /*allow_bytes=*/false, &nullable);
  KVS_RETURN_IF_ERROR(CheckLeftRecursion(*a, nullable));
  ComputeMinBytes(a, preds);
  ComputeFollow(a, preds);
  return Status::Ok();
}

}  // namespace kvs::grammar::internal
