#include "plan/parallel.h"

#include <numeric>

#include <gtest/gtest.h>

#include "plan/plan.h"

namespace kvs::plan {
namespace {

ModelShape Preset(const char* name) {
  StatusOr<ModelShape> s = FindPreset(name);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

PlanOptions On(const char* device, int64_t context, int64_t concurrency) {
  PlanOptions o;
  o.context = context;
  o.concurrency = concurrency;
  o.device = *ResolveDevice(device);
  return o;
}

uint64_t Sum(const ParallelPlan& p, uint64_t RankPlan::*field) {
  uint64_t s = 0;
  for (const RankPlan& r : p.ranks) s += r.*field;
  return s;
}

// One rank is the single-device plan, account by account.
TEST(Parallel, OneRankIsTheWholePlan) {
  for (const char* name : {"Llama-3.1-8B", "Qwen2.5-7B", "Qwen3-30B-A3B", "Mixtral-8x7B"}) {
    const ModelShape s = Preset(name);
    const PlanOptions o = On("h100-80g", 8192, 4);
    const MemoryPlan whole = ComputePlan(s, o);
    const ParallelPlan p = ComputeParallelPlan(s, o, {1, 1});
    ASSERT_EQ(p.ranks.size(), 1u) << name;
    const RankPlan& r = p.ranks[0];
    EXPECT_EQ(r.weights_bytes, whole.weights_bytes) << name;
    EXPECT_EQ(r.kv_bytes, whole.kv_bytes) << name;
    EXPECT_EQ(r.activation_bytes, whole.activation_bytes) << name;
    EXPECT_EQ(r.overhead_bytes, whole.overhead_bytes) << name;
    EXPECT_EQ(r.fits, whole.fits) << name;
    EXPECT_EQ(p.max_concurrency_at_context, whole.max_concurrency_at_context) << name;
    EXPECT_TRUE(r.embeddings && r.output_head && r.samples) << name;
    EXPECT_EQ(r.num_layers, s.layers);
  }
}

// Tensor parallel 2 on Llama-3.1-8B (32 heads, 8 KV heads): each rank holds
// half the heads, half the KV, about half the weights (norms replicated).
TEST(Parallel, TensorParallelSplitsHeadsKvAndWeights) {
  const ModelShape s = Preset("Llama-3.1-8B");
  const PlanOptions o = On("h100-80g", 32768, 8);
  const MemoryPlan whole = ComputePlan(s, o);
  const ParallelPlan p = ComputeParallelPlan(s, o, {2, 1});
  ASSERT_EQ(p.ranks.size(), 2u);
  for (const RankPlan& r : p.ranks) {
    EXPECT_EQ(r.heads, 16);
    EXPECT_EQ(r.kv_heads, 4);
    EXPECT_EQ(r.ffn, s.ffn / 2);
    EXPECT_EQ(r.num_layers, 32);
    EXPECT_EQ(r.kv_bytes * 2, whole.kv_bytes);  // sharded, not replicated
    EXPECT_TRUE(r.embeddings && r.output_head);  // vocabulary-parallel on one stage
  }
  EXPECT_EQ(p.kv_head_replicas, 1);
  const uint64_t w = Sum(p, &RankPlan::weights_bytes);
  EXPECT_GE(w, whole.weights_bytes);
  EXPECT_LT(static_cast<double>(w), static_cast<double>(whole.weights_bytes) * 1.001);  // norms only
  // Rank 0 samples: it also holds the gathered logits.
  EXPECT_TRUE(p.ranks[0].samples);
  EXPECT_FALSE(p.ranks[1].samples);
  EXPECT_EQ(p.ranks[0].activation_bytes - p.ranks[1].activation_bytes, uint64_t(o.concurrency) * s.vocab * 4);
  // The replicated hidden states make a rank's activations more than half.
  EXPECT_GT(p.ranks[1].activation_bytes * 2, whole.activation_bytes - uint64_t(o.concurrency) * s.vocab * 4);
}

// Pipeline parallel: contiguous layer ranges, the first stages one more
// layer when they do not divide; embeddings first, head last.
TEST(Parallel, PipelineStagesHoldContiguousLayers) {
  const ModelShape s = Preset("Llama-3.1-70B");  // 80 layers
  const PlanOptions o = On("h100-80g", 8192, 4);
  const MemoryPlan whole = ComputePlan(s, o);
  const ParallelPlan p = ComputeParallelPlan(s, o, {1, 3});
  ASSERT_EQ(p.ranks.size(), 3u);
  EXPECT_EQ(p.ranks[0].first_layer, 0);
  EXPECT_EQ(p.ranks[0].num_layers, 27);
  EXPECT_EQ(p.ranks[1].first_layer, 27);
  EXPECT_EQ(p.ranks[1].num_layers, 27);
  EXPECT_EQ(p.ranks[2].first_layer, 54);
  EXPECT_EQ(p.ranks[2].num_layers, 26);
  EXPECT_TRUE(p.ranks[0].embeddings && !p.ranks[0].output_head);
  EXPECT_TRUE(!p.ranks[1].embeddings && !p.ranks[1].output_head);
  EXPECT_TRUE(!p.ranks[2].embeddings && p.ranks[2].output_head);
  EXPECT_EQ(Sum(p, &RankPlan::kv_bytes), whole.kv_bytes);
  // Untied embeddings: nothing is held twice, so the weights add up (to rounding).
  const double w = static_cast<double>(Sum(p, &RankPlan::weights_bytes));
  EXPECT_NEAR(w, static_cast<double>(whole.weights_bytes), 4);
  // Only the last stage computes logits, only rank 0 gathers them.
  EXPECT_EQ(p.ranks[0].heads, s.heads);
  EXPECT_GT(p.ranks[2].activation_bytes, p.ranks[1].activation_bytes);
}

// Tied embeddings over two stages: the last stage holds its own copy.
TEST(Parallel, TiedEmbeddingsAreCopiedToTheLastStage) {
  ModelShape s = Preset("Llama-3.2-1B");
  ASSERT_TRUE(s.tied_embeddings);
  const PlanOptions o = On("a10", 4096, 1);
  const MemoryPlan whole = ComputePlan(s, o);
  const ParallelPlan one = ComputeParallelPlan(s, o, {1, 1});
  const ParallelPlan two = ComputeParallelPlan(s, o, {1, 2});
  EXPECT_EQ(one.ranks[0].weights_bytes, whole.weights_bytes);
  const uint64_t embd = static_cast<uint64_t>(s.vocab * s.hidden);  // parameters
  const double per_param = static_cast<double>(whole.weights_bytes) / static_cast<double>(one.ranks[0].params);
  EXPECT_NEAR(static_cast<double>(Sum(two, &RankPlan::weights_bytes)),
              static_cast<double>(whole.weights_bytes) + static_cast<double>(embd) * per_param, 8);
}

// Fewer KV heads than ranks: each KV head replicated (vLLM's rule).
TEST(Parallel, KvHeadsFewerThanRanksAreReplicated) {
  const ModelShape s = Preset("Llama-3.1-8B");  // 8 KV heads
  const PlanOptions o = On("h100-80g", 8192, 4);
  const MemoryPlan whole = ComputePlan(s, o);
  ASSERT_TRUE(ValidateLayout(s, {16, 1}).ok());
  const ParallelPlan p = ComputeParallelPlan(s, o, {16, 1});
  EXPECT_EQ(p.kv_head_replicas, 2);
  for (const RankPlan& r : p.ranks) {
    EXPECT_EQ(r.heads, 2);
    EXPECT_EQ(r.kv_heads, 1);
    EXPECT_EQ(r.kv_bytes * 8, whole.kv_bytes);
  }
  EXPECT_EQ(Sum(p, &RankPlan::kv_bytes), 2 * whole.kv_bytes);
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("replicated"), std::string::npos) << p.notes[0];
}

TEST(Parallel, LayoutsTheHeadsDoNotAllowAreRefusedNamingTheLimit) {
  const ModelShape s = Preset("Llama-3.1-8B");  // 32 heads, 8 KV heads, 32 layers
  Status st = ValidateLayout(s, {3, 1});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("32 attention heads"), std::string::npos) << st.message();
  st = ValidateLayout(s, {32, 1});  // 32 heads / 32 ok, 32 % 8 ok: replicated 4x
  EXPECT_TRUE(st.ok()) << st.message();
  ModelShape odd = s;
  odd.kv_heads = 6;
  odd.heads = 24;
  st = ValidateLayout(odd, {4, 1});  // 6 KV heads: 4 neither divides nor is a multiple
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("6 KV heads"), std::string::npos) << st.message();
  st = ValidateLayout(s, {1, 33});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("32 layers"), std::string::npos) << st.message();
  EXPECT_FALSE(ValidateLayout(s, {0, 1}).ok());
  EXPECT_FALSE(ValidateLayout(s, {1, 0}).ok());
}

// A model too large for one 24 GiB machine: refused at one rank, naming the
// rank and the shortfall; fits split four ways, with more concurrency the
// more ranks share it.
TEST(Parallel, TooLargeForOneMachineFitsSplit) {
  const ModelShape s = Preset("Llama-3.1-70B");
  PlanOptions o = On("cpu:24GiB", 8192, 1);
  o.weights_format = WeightFormat::kQ4_K_M;
  o.threads = 8;
  const ParallelPlan one = ComputeParallelPlan(s, o, {1, 1});
  EXPECT_FALSE(one.fits);
  EXPECT_EQ(one.max_concurrency_at_context, 0);
  EXPECT_NE(one.shortfall.find("rank 0 (stage 0, tp 0)"), std::string::npos) << one.shortfall;
  EXPECT_NE(one.shortfall.find("short"), std::string::npos) << one.shortfall;
  const ParallelPlan two = ComputeParallelPlan(s, o, {2, 1});
  const ParallelPlan four = ComputeParallelPlan(s, o, {4, 1});
  const ParallelPlan tp2pp2 = ComputeParallelPlan(s, o, {2, 2});
  EXPECT_TRUE(four.fits) << four.shortfall;
  EXPECT_TRUE(tp2pp2.fits) << tp2pp2.shortfall;
  EXPECT_GT(four.max_concurrency_at_context, two.max_concurrency_at_context);
  EXPECT_GT(four.max_concurrency_at_context, 1);
  EXPECT_TRUE(four.shortfall.empty());
  // The plan's concurrency is where the tightest rank stops fitting.
  PlanOptions at = o;
  at.concurrency = four.max_concurrency_at_context;
  EXPECT_TRUE(ComputeParallelPlan(s, at, {4, 1}).fits);
  at.concurrency += 1;
  EXPECT_FALSE(ComputeParallelPlan(s, at, {4, 1}).fits);
}

TEST(Parallel, JsonAndTextNameEveryRank) {
  const ModelShape s = Preset("Llama-3.1-8B");
  const ParallelPlan p = ComputeParallelPlan(s, On("h100-80g", 8192, 4), {2, 2});
  const nlohmann::json j = ParallelPlanToJson(p);
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["tensor_parallel"], 2);
  EXPECT_EQ(j["pipeline_parallel"], 2);
  EXPECT_EQ(j["ranks"][3]["stage"], 1);
  EXPECT_EQ(j["ranks"][3]["tp_rank"], 1);
  EXPECT_EQ(j["ranks"][3]["first_layer"], 16);
  const std::string text = ParallelPlanToText(p);
  EXPECT_NE(text.find("tensor 2 x pipeline 2 = 4 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("16-31"), std::string::npos) << text;
}

}  // namespace
}  // namespace kvs::plan
