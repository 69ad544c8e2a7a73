// Automaton: a Grammar compiled to one deterministic byte automaton per rule,
// whose edges either consume a byte range or call another rule (a recursive
// transition network). The matcher (matcher.h) runs it as a pushdown
// automaton over sets of stacks of states.
//
// Built by BuildAutomaton, which rejects (with an error naming the rule):
// undefined rules, rules that can never finish, left recursion (a rule that
// can reach a call of itself without consuming a byte), and grammars over
// the size limits.
//
// Invariants: per state, byte edges are sorted by `lo`, disjoint, and lead
// to states of the same rule; every state can reach a final state of its
// rule (dead states are trimmed), so every live parse stack can be
// completed; call edges name productive rules. States of rule r are
// contiguous, starting at rule_start[r].
// Thread-safety: immutable after BuildAutomaton.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"

namespace kvs::grammar {

struct Automaton {
  struct ByteEdge {
    uint8_t lo = 0;
    uint8_t hi = 0;
    int32_t target = -1;
  };
  struct CallEdge {
    int32_t rule = -1;   // the callee
    int32_t ret = -1;    // state of the caller's rule to continue from
  };
  struct State {
    uint32_t byte_begin = 0, byte_end = 0;  // [byte_begin, byte_end) in byte_edges
    uint32_t call_begin = 0, call_end = 0;  // [call_begin, call_end) in call_edges
    int32_t rule = -1;
    bool final = false;
    // Whether a stack whose top is this state must be expanded (it calls a
    // rule or may return): the matcher's fast path skips the others.
    bool needs_closure() const { return final || call_end > call_begin; }
    bool has_bytes() const { return byte_end > byte_begin; }
  };

  std::vector<State> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  std::vector<int32_t> rule_start;       // [rule] start state
  std::vector<std::string> rule_names;   // [rule]
  std::vector<int32_t> min_bytes;        // [state] fewest bytes to finish its rule
  std::vector<int32_t> rule_min_bytes;   // [rule] fewest bytes of the rule
  // [rule] states where text may continue right after the rule finishes, in
  // any context: the return states of its call sites, and (when such a
  // state is final) the follow states of that state's rule, transitively.
  // Empty with follow_complete false when there are more than
  // kMaxFollowStates (the token cache then treats the continuation as
  // unknown).
  std::vector<std::vector<int32_t>> follow;
  std::vector<uint8_t> follow_complete;  // [rule]
  static constexpr size_t kMaxFollowStates = 48;
  int32_t root_rule = -1;

  // The target of `b` from state q, or -1.
  int32_t Step(int32_t q, uint8_t b) const {
    const State& s = states[q];
    for (uint32_t i = s.byte_begin; i < s.byte_end; ++i) {
      const ByteEdge& e = byte_edges[i];
      if (b < e.lo) return -1;
      if (b <= e.hi) return e.target;
    }
    return -1;
  }
  int32_t num_states() const { return static_cast<int32_t>(states.size()); }
};

StatusOr<Automaton> BuildAutomaton(const Grammar& grammar, const GrammarLimits& limits = {});

}  // namespace kvs::grammar
