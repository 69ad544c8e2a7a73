#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>

namespace kvs::engine {
namespace {

// Drives a Scheduler the way the engine does, without a model: every
// sequence that reaches its end "samples" a token that depends on its length.
class SchedulerHarness {
 public:
  SchedulerHarness(int32_t num_blocks, int32_t block_size, SchedulerConfig config, bool caching = true)
      : bm(num_blocks, block_size, caching), sched(config, &bm) {}

  Sequence* Add(int32_t prompt_len, int32_t max_tokens, int32_t priority = 0, int32_t first_token = 1) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    for (int32_t i = 0; i < prompt_len; ++i) prompt[static_cast<size_t>(i)] = first_token + i % 7;
    SamplingParams p;
    p.max_tokens = max_tokens;
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size()), "r", std::move(prompt), p));
    seqs.back()->priority = priority;
    sched.Add(seqs.back().get());
    return seqs.back().get();
  }

  // One step; returns the plan (valid until the next call).
  const SchedulerOutput& Step() {
    const SchedulerOutput& out = sched.Schedule();
    std::vector<std::vector<int32_t>> sampled;
    for (const ScheduledSeq& s : out.seqs) {
      sampled.push_back(s.samples() ? std::vector<int32_t>{100 + s.seq->num_tokens() % 50} : std::vector<int32_t>{});
    }
    sched.Postprocess(out, sampled);
    return out;
  }

  std::string CheckInvariants() const {
    if (std::string e = bm.CheckInvariants(); !e.empty()) return e;
    std::map<int32_t, int32_t> refs;
    for (const auto& s : seqs) {
      for (int32_t b : s->block_table) ++refs[b];
      if (s->is_finished() && !s->block_table.empty()) return "finished sequence holds blocks";
      if (s->status == SequenceStatus::kWaiting && !s->block_table.empty()) return "waiting sequence holds blocks";
    }
    for (int32_t b = 0; b < bm.num_blocks(); ++b) {
      if (bm.ref_count(b) != refs[b]) return fmt::format("block {} ref count {} vs {}", b, bm.ref_count(b), refs[b]);
    }
    std::set<const Sequence*> seen;
    for (const Sequence* s : sched.running()) {
      if (s->status != SequenceStatus::kRunning || !seen.insert(s).second) return "bad running queue";
    }
    for (const Sequence* s : sched.waiting()) {
      if (s->status != SequenceStatus::kWaiting || !seen.insert(s).second) return "bad waiting queue";
    }
    if (sched.num_running() > sched.config().max_batch_size) return "too many running";
    return "";
  }

  BlockManager bm;
  Scheduler sched;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

SchedulerConfig Config(int32_t tokens, int32_t batch, SchedulingPolicy policy = SchedulingPolicy::kFcfs) {
  SchedulerConfig c;
  c.max_num_batched_tokens = tokens;
  c.max_batch_size = batch;
  c.policy = policy;
  return c;
}

TEST(SchedulerTest, LongPromptIsChunkedAndNeverStallsRunningDecodes) {
  SchedulerHarness h(1024, 16, Config(64, 8));
  std::vector<Sequence*> decoders;
  for (int i = 0; i < 3; ++i) decoders.push_back(h.Add(10, 500));
  h.Step();  // the three prompts in one batch
  Sequence* longp = h.Add(3000, 10);
  int prefill_steps = 0;
  while (longp->num_output_tokens() == 0) {
    const SchedulerOutput& out = h.Step();
    ASSERT_LE(out.num_tokens, 64);
    int decodes = 0;
    for (const ScheduledSeq& s : out.seqs) {
      if (std::find(decoders.begin(), decoders.end(), s.seq) != decoders.end()) {
        EXPECT_EQ(s.num_new_tokens, 1);
        ++decodes;
      }
    }
    EXPECT_EQ(decodes, 3) << "every running decode is in every step";
    ++prefill_steps;
    ASSERT_LT(prefill_steps, 100);
  }
  EXPECT_EQ(prefill_steps, (3000 + 60) / 61);  // 61 prompt tokens per step next to 3 decodes
  EXPECT_EQ(h.CheckInvariants(), "");
}

// max_prefill_tokens_while_decoding: next to decodes a long prompt gets at
// most the cap a step; alone, and once the decodes end, the whole budget.
TEST(SchedulerTest, PrefillIsCappedWhileOthersDecodeAndFullAlone) {
  SchedulerConfig c = Config(256, 8);
  c.max_prefill_tokens_while_decoding = 32;
  SchedulerHarness h(1024, 16, c);
  Sequence* alone = h.Add(1000, 2);
  const SchedulerOutput& first = h.Step();
  ASSERT_EQ(first.seqs.size(), 1u);
  EXPECT_EQ(first.seqs[0].num_new_tokens, 256) << "nobody decodes: the whole budget";
  while (alone->num_output_tokens() == 0) h.Step();
  // `alone` now decodes (one more token to go) when a second long prompt
  // arrives.
  Sequence* longp = h.Add(1000, 1, 0, /*first_token=*/50);  // no prefix hit on `alone`'s blocks
  const SchedulerOutput& next = h.Step();
  int32_t prefill = 0;
  for (const ScheduledSeq& s : next.seqs) {
    if (s.seq == alone) {
      EXPECT_EQ(s.num_new_tokens, 1);
    } else {
      prefill += s.num_new_tokens;
    }
  }
  EXPECT_EQ(prefill, 32) << "capped next to a decode";
  ASSERT_TRUE(alone->is_finished());
  // The decode ended: the long prompt has the whole budget again.
  const SchedulerOutput& after = h.Step();
  ASSERT_EQ(after.seqs.size(), 1u);
  EXPECT_EQ(after.seqs[0].seq, longp);
  EXPECT_EQ(after.seqs[0].num_new_tokens, 256);
  EXPECT_EQ(h.CheckInvariants(), "");

  // Without the cap the same step carries the budget less the decodes.
  SchedulerHarness u(1024, 16, Config(256, 8));
  Sequence* d = u.Add(10, 50);
  u.Step();
  u.Add(1000, 1, 0, /*first_token=*/50);
  const SchedulerOutput& uncapped = u.Step();
  int32_t p = 0;
  for (const ScheduledSeq& s : uncapped.seqs) p += s.seq == d ? 0 : s.num_new_tokens;
  EXPECT_EQ(p, 255);
}

TEST(SchedulerTest, RespectsTokenBudgetAndBatchSize) {
  SchedulerHarness h(4096, 16, Config(100, 4));
  for (int i = 0; i < 10; ++i) h.Add(30 + i, 20);
  int steps = 0;
  while (h.sched.HasWork()) {
    const SchedulerOutput& out = h.Step();
    EXPECT_LE(out.num_tokens, 100);
    EXPECT_LE(out.seqs.size(), 4u);
    EXPECT_LE(h.sched.num_running(), 4);
    ASSERT_EQ(h.CheckInvariants(), "");
    ASSERT_LT(++steps, 1000);
  }
  for (const auto& s : h.seqs) {
    EXPECT_EQ(s->finish_reason, FinishReason::kLength);
    EXPECT_EQ(s->num_output_tokens(), 20);
  }
}

TEST(SchedulerTest, FcfsHeadOfLineIsNotOvertaken) {
  SchedulerHarness h(10, 16, Config(2048, 8));
  Sequence* a = h.Add(100, 40);   // 7 blocks, later 9
  Sequence* big = h.Add(100, 5, 0, /*first_token=*/20);  // does not fit next to a
  Sequence* small = h.Add(5, 5, 0, /*first_token=*/40);  // would fit, but must not overtake big
  h.Step();
  EXPECT_EQ(a->status, SequenceStatus::kRunning);
  EXPECT_EQ(big->status, SequenceStatus::kWaiting);
  EXPECT_EQ(small->status, SequenceStatus::kWaiting);
  while (!a->is_finished()) h.Step();
  h.Step();
  EXPECT_EQ(big->status, SequenceStatus::kRunning);
}

TEST(SchedulerTest, PreemptsTheNewestAndRequeuesItAtTheFront) {
  // 6 blocks of 4: two sequences of 8 prompt tokens (2 blocks each) that grow.
  SchedulerHarness h(6, 4, Config(64, 4));
  Sequence* old = h.Add(8, 12);
  Sequence* newer = h.Add(8, 12);
  h.Step();
  ASSERT_EQ(old->status, SequenceStatus::kRunning);
  ASSERT_EQ(newer->status, SequenceStatus::kRunning);
  bool preempted = false;
  for (int step = 0; step < 40 && !preempted; ++step) {
    const SchedulerOutput& out = h.Step();
    for (Sequence* v : out.preempted) {
      preempted = true;
      EXPECT_NE(v, old) << "the oldest is never the victim while others run";
      EXPECT_EQ(v->status, SequenceStatus::kWaiting);
      EXPECT_TRUE(v->block_table.empty());
      EXPECT_EQ(v->num_computed_tokens, 0);
    }
    if (preempted) {
      EXPECT_EQ(h.sched.waiting().front(), out.preempted.back()) << "victims go to the front";
    }
    ASSERT_EQ(h.CheckInvariants(), "");
  }
  ASSERT_TRUE(preempted);
  EXPECT_GE(h.sched.num_preemptions(), 1);
  while (h.sched.HasWork()) {
    h.Step();
    ASSERT_EQ(h.CheckInvariants(), "");
  }
  for (const auto& s : h.seqs) EXPECT_EQ(s->finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.bm.num_used(), 0);
}

TEST(SchedulerTest, FullOutputReservationAdmitsByPredictedPeakAndNeverPreempts) {
  // The workload that preempts above: 6 blocks of 4, two 8-token prompts
  // growing by 12 (peak 20 tokens = 5 blocks each). Reserving the whole
  // output admits the second only once the first has finished.
  SchedulerConfig c = Config(64, 4);
  c.output_reservation = 1.0;
  SchedulerHarness h(6, 4, c);
  Sequence* first = h.Add(8, 12);
  Sequence* second = h.Add(8, 12);
  h.Step();
  EXPECT_EQ(first->status, SequenceStatus::kRunning);
  EXPECT_EQ(second->status, SequenceStatus::kWaiting) << "5 + 5 blocks of predicted peak exceed 6";
  while (h.sched.HasWork()) {
    const SchedulerOutput& out = h.Step();
    EXPECT_TRUE(out.preempted.empty());
    if (second->status == SequenceStatus::kRunning) {
      EXPECT_TRUE(first->is_finished());
    }
    ASSERT_EQ(h.CheckInvariants(), "");
  }
  EXPECT_EQ(h.sched.num_preemptions(), 0);
  EXPECT_EQ(second->finish_reason, FinishReason::kLength);

  // Half the output (6 tokens: peak 14 = 4 blocks each): 4 + 4 exceed 6.
  c.output_reservation = 0.5;
  SchedulerHarness half(6, 4, c);
  Sequence* a = half.Add(8, 12);
  Sequence* b = half.Add(8, 12);
  half.Step();
  EXPECT_EQ(a->status, SequenceStatus::kRunning);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting) << "4 + 4 blocks exceed 6";
  SchedulerHarness none(6, 4, Config(64, 4));
  Sequence* x = none.Add(8, 12);
  Sequence* y = none.Add(8, 12);
  none.Step();
  EXPECT_EQ(x->status, SequenceStatus::kRunning);
  EXPECT_EQ(y->status, SequenceStatus::kRunning) << "without a reservation both prompts fit";
}

TEST(SchedulerTest, NoAdmissionInAStepThatPreempted) {
  // 8 blocks of 4: two sequences that need 7 blocks each cannot both finish.
  SchedulerHarness h(8, 4, Config(64, 4));
  h.Add(7, 20);
  h.Add(7, 20, 0, /*first_token=*/3);
  h.Step();
  h.Add(1, 1);
  int preempting_steps = 0;
  for (int step = 0; step < 200 && h.sched.HasWork(); ++step) {
    const std::set<const Sequence*> before(h.sched.running().begin(), h.sched.running().end());
    const SchedulerOutput& out = h.Step();
    ASSERT_EQ(h.CheckInvariants(), "");
    if (out.preempted.empty()) continue;
    ++preempting_steps;
    for (const ScheduledSeq& s : out.seqs) {
      EXPECT_EQ(before.count(s.seq), 1u) << "a sequence was admitted in a step that preempted";
    }
  }
  EXPECT_GT(preempting_steps, 0);
  EXPECT_FALSE(h.sched.HasWork());
}

TEST(SchedulerTest, PriorityPolicyServesLowerValuesFirstAndPreemptsForThem) {
  SchedulerConfig c = Config(2048, 2, SchedulingPolicy::kPriority);
  SchedulerHarness h(64, 4, c);
  Sequence* low1 = h.Add(4, 50, /*priority=*/5);
  Sequence* low2 = h.Add(4, 50, /*priority=*/5);
  h.Step();
  ASSERT_EQ(h.sched.num_running(), 2);
  Sequence* urgent = h.Add(4, 3, /*priority=*/0);
  const SchedulerOutput& out = h.Step();
  EXPECT_EQ(urgent->status, SequenceStatus::kRunning);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], low2) << "the newest of the lowest priority is the victim";
  EXPECT_EQ(low1->status, SequenceStatus::kRunning);
  for (const ScheduledSeq& s : out.seqs) EXPECT_NE(s.seq, low2) << "the victim left this step's batch";
  while (h.sched.HasWork()) {
    h.Step();
    ASSERT_EQ(h.CheckInvariants(), "");
  }
  EXPECT_EQ(low2->num_output_tokens(), 50);
  EXPECT_EQ(urgent->num_output_tokens(), 3);
}

TEST(SchedulerTest, FinishRemovesFromAnyQueueAndFreesBlocks) {
  SchedulerHarness h(64, 4, Config(64, 1));
  Sequence* run = h.Add(10, 100);
  Sequence* wait = h.Add(10, 100);
  h.Step();
  ASSERT_EQ(run->status, SequenceStatus::kRunning);
  ASSERT_EQ(wait->status, SequenceStatus::kWaiting);
  h.sched.Finish(wait, FinishReason::kCancelled);
  h.sched.Finish(run, FinishReason::kCancelled);
  h.sched.Finish(run, FinishReason::kError);  // no-op
  EXPECT_EQ(run->finish_reason, FinishReason::kCancelled);
  EXPECT_FALSE(h.sched.HasWork());
  EXPECT_EQ(h.bm.num_used(), 0);
  EXPECT_TRUE(h.sched.Schedule().empty());
}

// Random arrivals and cancels into a small pool: invariants after every step,
// every sequence finishes exactly once, no work is lost.
TEST(SchedulerTest, RandomWorkloadKeepsInvariants) {
  for (SchedulingPolicy policy : {SchedulingPolicy::kFcfs, SchedulingPolicy::kPriority}) {
    SchedulerConfig c = Config(48, 6, policy);
    c.watermark_blocks = 1;
    c.eos_token_ids = {137};
    SchedulerHarness h(40, 4, c);
    std::mt19937_64 rng(policy == SchedulingPolicy::kFcfs ? 1 : 2);
    int64_t preemptions = 0;
    for (int step = 0; step < 4000; ++step) {
      if (rng() % 3 == 0 && h.seqs.size() < 600) {
        const auto prompt = static_cast<int32_t>(1 + rng() % 60);
        const auto max_tokens = static_cast<int32_t>(1 + rng() % 60);
        h.Add(prompt, max_tokens, static_cast<int32_t>(rng() % 3), static_cast<int32_t>(rng() % 3));
      }
      if (rng() % 10 == 0 && !h.seqs.empty()) {
        h.sched.Finish(h.seqs[rng() % h.seqs.size()].get(), FinishReason::kCancelled);
      }
      const SchedulerOutput& out = h.Step();
      preemptions += static_cast<int64_t>(out.preempted.size());
      ASSERT_LE(out.num_tokens, 48);
      ASSERT_EQ(h.CheckInvariants(), "") << "step " << step;
      if (!h.sched.HasWork() && h.seqs.size() >= 600) break;
    }
    while (h.sched.HasWork()) {
      h.Step();
      ASSERT_EQ(h.CheckInvariants(), "");
    }
    EXPECT_GT(preemptions, 0);
    for (const auto& s : h.seqs) {
      ASSERT_TRUE(s->is_finished());
      if (*s->finish_reason == FinishReason::kLength) {
        EXPECT_EQ(s->num_output_tokens(), s->params.max_tokens);
      }
      if (*s->finish_reason == FinishReason::kStop) {
        EXPECT_EQ(s->token_ids.back(), 137);
      }
    }
    EXPECT_EQ(h.bm.num_used(), 0);
  }
}

}  // namespace
}  // namespace kvs::engine
