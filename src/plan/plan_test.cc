#include "plan/plan.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/test_util.h"

#include "gguf/gguf.h"
#include "model/random_model.h"
#include "plan/serving.h"

namespace kvs::plan {
namespace {

ModelShape P(const char* name) {
  StatusOr<ModelShape> s = FindPreset(name);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

PlanOptions H100(int64_t context, int64_t concurrency) {
  PlanOptions o;
  o.context = context;
  o.concurrency = concurrency;
  o.device = *ResolveDevice("h100-80g");
  return o;
}

// Published KV figures: 2 x layers x kv_heads x head_dim x 2 bytes (f16).
TEST(Kv, BytesPerTokenMatchPublishedFigures) {
  EXPECT_EQ(KvBytesPerToken(P("Llama-3.1-8B"), DType::kF16), 131072u);
  EXPECT_EQ(KvBytesPerToken(P("Llama-3.1-70B"), DType::kF16), 327680u);
  EXPECT_EQ(KvBytesPerToken(P("Qwen2.5-7B"), DType::kF16), 57344u);
  EXPECT_EQ(KvBytesPerToken(P("Llama-3.1-8B"), DType::kBF16), 131072u);
  EXPECT_EQ(KvBytesPerToken(P("Llama-3.1-8B"), DType::kF32), 262144u);
  // test-125m: 2 x 12 x 4 x 64 x 2.
  EXPECT_EQ(KvBytesPerToken(P("test-125m"), DType::kF16), 12288u);
}

TEST(Kv, Llama8B32KContextTimes16IsExactly64GiB) {
  const MemoryPlan p = ComputePlan(P("Llama-3.1-8B"), H100(32768, 16));
  EXPECT_EQ(p.kv_bytes_per_token, 131072u);
  EXPECT_EQ(p.kv_bytes, 68'719'476'736u);
  EXPECT_EQ(p.kv_bytes, uint64_t{64} << 30);
  EXPECT_EQ(p.kv_blocks_per_sequence, 2048);
}

TEST(Kv, Q8_0Is34Over64OfF16PerValue) {
  for (const char* name : {"Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B", "Llama-3.2-1B"}) {
    const ModelShape s = P(name);
    EXPECT_EQ(KvBytesPerToken(s, DType::kQ8_0) * 64, KvBytesPerToken(s, DType::kF16) * 34) << name;
    EXPECT_EQ(KvBytesPerToken(s, DType::kQ4_0) * 64, KvBytesPerToken(s, DType::kF16) * 18) << name;
  }
  EXPECT_EQ(KvBytesPerToken(P("Llama-3.1-8B"), DType::kQ8_0), 69632u);
}

TEST(Kv, BlockRounding) {
  const ModelShape s = P("Llama-3.1-8B");
  PlanOptions o = H100(1000, 3);  // 1000 tokens -> 63 blocks of 16 = 1008 tokens
  MemoryPlan p = ComputePlan(s, o);
  EXPECT_EQ(p.kv_blocks_per_sequence, 63);
  EXPECT_EQ(p.kv_bytes, 3u * 1008u * 131072u);
  o.block_size = 256;  // 4 blocks = 1024 tokens
  p = ComputePlan(s, o);
  EXPECT_EQ(p.kv_bytes, 3u * 1024u * 131072u);
  EXPECT_EQ(KvBlocksForTokens(16, 16), 1);
  EXPECT_EQ(KvBlocksForTokens(17, 16), 2);
  EXPECT_EQ(KvBlocksForTokens(0, 16), 0);
}

TEST(Weights, PresetParameterCountsMatchPublishedTotals) {
  EXPECT_EQ(P("Llama-3.1-8B").params, 8'030'261'248);
  EXPECT_EQ(P("Llama-3.1-70B").params, 70'553'706'496);
  EXPECT_EQ(P("Qwen2.5-7B").params, 7'615'616'512);  // "7.61B"
  // Published rounded totals (billions): within half a unit of the last digit.
  const std::pair<const char*, double> published[] = {
      {"Llama-3.2-1B", 1.24}, {"Llama-3.2-3B", 3.21},   {"Qwen2.5-72B", 72.7},
      {"Qwen3-8B", 8.19},     {"Mistral-7B-v0.3", 7.25}, {"test-125m", 0.125},
      {"Qwen3-30B-A3B", 30.5}, {"Mixtral-8x7B", 46.7},
  };
  for (const auto& [name, billions] : published) {
    EXPECT_NEAR(static_cast<double>(P(name).params) / 1e9, billions, billions * 0.005) << name;
  }
}

TEST(Weights, Llama8BBf16IsAbout16GB) {
  const ModelShape s = P("Llama-3.1-8B");
  EXPECT_EQ(WeightBytesFromShape(s, WeightFormat::kBF16), 16'060'522'496u);  // 2 bytes x 8.03B
  EXPECT_NEAR(static_cast<double>(WeightBytesFromShape(s, WeightFormat::kBF16)), 16.06e9, 0.01e9);
  EXPECT_EQ(WeightBytesFromShape(s, WeightFormat::kF32), 2 * 16'060'522'496u);
  // Default for a preset is its bf16 checkpoint.
  EXPECT_EQ(ComputePlan(s, H100(1024, 1)).weights_bytes, 16'060'522'496u);
}

TEST(Weights, QuantizedFormats) {
  EXPECT_EQ(MatrixBytes(WeightFormat::kQ8_0, 4096, 4096), 4096u * 128u * 34u);
  EXPECT_EQ(MatrixBytes(WeightFormat::kQ4_0, 4096, 4096), 4096u * 128u * 18u);
  EXPECT_EQ(MatrixBytes(WeightFormat::kQ6_K, 4096, 4096), 4096u * 16u * 210u);
  EXPECT_EQ(MatrixBytes(WeightFormat::kQ8_0, 2, 33), 2u * 2u * 34u);  // rows round up to whole blocks
  EXPECT_EQ(MatrixBytes(WeightFormat::kQ4_K_M, 1600, 100), 97'000u);  // 4.85 bits x 160000
  EXPECT_EQ(VectorBytes(WeightFormat::kQ4_K_M, 10), 40u);             // norms stay f32
  EXPECT_EQ(VectorBytes(WeightFormat::kBF16, 10), 20u);
  // Llama-3.1-8B q4_k_m: ~4.85 bits per weight over all weights.
  const double bits = 8.0 * static_cast<double>(WeightBytesFromShape(P("Llama-3.1-8B"), WeightFormat::kQ4_K_M)) /
                      static_cast<double>(P("Llama-3.1-8B").params);
  EXPECT_NEAR(bits, 4.85, 0.01);
  for (WeightFormat f : AllWeightFormats()) {
    StatusOr<WeightFormat> back = ParseWeightFormat(WeightFormatName(f));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, f);
  }
  EXPECT_EQ(*ParseWeightFormat("Q4_K_M"), WeightFormat::kQ4_K_M);
  EXPECT_FALSE(ParseWeightFormat("q3_k").ok());
}

TEST(Activations, FormulaTermByTerm) {
  const ModelShape s = P("test-125m");  // hidden 768, 12 heads, 4 KV heads x 64, ffn 2048, vocab 32000
  const ActivationBreakdown a = Activations(s, 2048, 4, 4096, 8);
  EXPECT_EQ(a.hidden_states, 2u * 2048 * 768 * 4);
  EXPECT_EQ(a.residual, 2048u * 768 * 4);
  EXPECT_EQ(a.qkv, 2048u * (12 + 8) * 64 * 4);
  EXPECT_EQ(a.attention_out, 2048u * 12 * 64 * 4);
  EXPECT_EQ(a.attention_scratch, 8u * 4096 * 4);
  EXPECT_EQ(a.mlp, 2048u * 2 * 2048 * 4);
  EXPECT_EQ(a.logits, 4u * 32000 * 4);
  EXPECT_EQ(ActivationPeakBytes(s, 2048, 4, 4096, 8), a.Total());
  // The plan uses max(max_num_batched_tokens, max_batch_size) tokens.
  PlanOptions o = H100(4096, 4);
  o.threads = 8;
  EXPECT_EQ(ComputePlan(s, o).activation_bytes, a.Total());
  o.max_num_batched_tokens = 16;
  o.max_batch_size = 64;
  EXPECT_EQ(ComputePlan(s, o).activation_bytes, ActivationPeakBytes(s, 64, 64, 4096, 8));
  // A step never holds more tokens than all sequences together.
  o = H100(100, 2);
  o.threads = 8;
  EXPECT_EQ(ComputePlan(s, o).activation_bytes, ActivationPeakBytes(s, 200, 2, 100, 8));
}

TEST(Plan, TotalsAndOverhead) {
  const MemoryPlan p = ComputePlan(P("Llama-3.1-8B"), H100(32768, 16));
  EXPECT_EQ(p.overhead_bytes, (uint64_t{512} << 20) + 32 * (uint64_t{8} << 20));
  EXPECT_EQ(p.total_bytes, p.weights_bytes + p.kv_bytes + p.activation_bytes + p.overhead_bytes);
  EXPECT_EQ(p.per_device_bytes, p.total_bytes);
  // 16 GB of weights + 64 GiB of KV cannot fit 80 GB.
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.devices_needed, 2);
  EXPECT_FALSE(p.suggestions.empty());
}

// Independent devices_needed: smallest N with (ceil(split/N) + replicated) * 1.15 <= budget.
TEST(Plan, DevicesNeededWith15PercentMargin) {
  for (const char* name : {"Llama-3.1-70B", "Qwen2.5-72B", "Llama-3.1-8B"}) {
    for (const char* dev : {"h100-80g", "a10", "l40s", "h200"}) {
      PlanOptions o = H100(65536, 8);
      o.device = *ResolveDevice(dev);
      const ModelShape s = P(name);
      const MemoryPlan p = ComputePlan(s, o);
      const uint64_t split = p.weights_bytes + p.kv_bytes;
      const uint64_t repl = p.activation_bytes + p.overhead_bytes;
      int64_t expect = -1;
      for (int64_t n = 1; n <= kMaxDevices; ++n) {
        const double need = 1.15 * static_cast<double>((split + n - 1) / n + repl);
        if (need <= static_cast<double>(o.device.bytes)) {
          expect = n;
          break;
        }
      }
      EXPECT_EQ(p.devices_needed, expect) << name << " on " << dev;
      if (expect > 0) {
        o.devices = expect;
        EXPECT_TRUE(Fits(s, o));
        o.devices = expect - 1;
        if (expect > 1) {
          EXPECT_FALSE(Fits(s, o));
        }
      }
    }
  }
  // 70B bf16 (141 GB) with 64K x 8 of KV (160 GiB): 2 H100s are not enough.
  EXPECT_GT(ComputePlan(P("Llama-3.1-70B"), H100(65536, 8)).devices_needed, 2);
}

TEST(Plan, MarginBoundary) {
  const ModelShape s = P("test-125m");
  PlanOptions o = H100(4096, 4);
  const uint64_t need = ComputePlan(s, o).per_device_bytes;
  o.device.bytes = need * 115 / 100 + 1;  // just above need x 1.15
  EXPECT_TRUE(ComputePlan(s, o).fits);
  o.device.bytes = need * 115 / 100 - 1;  // just below
  EXPECT_FALSE(ComputePlan(s, o).fits);
  o.device.bytes = need + need / 20;  // the bytes fit, but not with 15 % to spare
  EXPECT_FALSE(ComputePlan(s, o).fits);
  o.margin = 0;
  EXPECT_TRUE(ComputePlan(s, o).fits);
  // memory_fraction scales the budget.
  o.margin = kDefaultMargin;
  o.device.bytes = need * 2;
  EXPECT_TRUE(ComputePlan(s, o).fits);
  o.memory_fraction = 0.5;
  EXPECT_FALSE(ComputePlan(s, o).fits);
  // Tensor parallel: weights and KV halve, activations and overhead do not.
  o = H100(4096, 4);
  o.devices = 2;
  const MemoryPlan two = ComputePlan(s, o);
  EXPECT_EQ(two.per_device_bytes,
            (two.weights_bytes + two.kv_bytes + 1) / 2 + two.activation_bytes + two.overhead_bytes);
}

TEST(Plan, MaxConcurrencyAndContextInvert) {
  struct Case { const char* model; const char* device; int64_t context, concurrency; DType kv; };
  const Case cases[] = {
      {"Llama-3.1-8B", "h100-80g", 32768, 16, DType::kF16},
      {"Llama-3.1-8B", "a10", 8192, 4, DType::kQ8_0},
      {"Qwen2.5-7B", "l40s", 32768, 8, DType::kF16},
      {"Qwen3-8B", "h200", 8192, 64, DType::kBF16},
  };
  for (const Case& c : cases) {
    PlanOptions o = H100(c.context, c.concurrency);
    o.device = *ResolveDevice(c.device);
    o.kv_dtype = c.kv;
    const ModelShape s = P(c.model);
    const MemoryPlan p = ComputePlan(s, o);
    SCOPED_TRACE(std::string(c.model) + " on " + c.device);
    ASSERT_GT(p.max_concurrency_at_context, 0);
    ASSERT_FALSE(p.max_concurrency_capped);
    PlanOptions x = o;
    x.concurrency = p.max_concurrency_at_context;
    EXPECT_TRUE(ComputePlan(s, x).fits);
    x.concurrency += 1;
    EXPECT_FALSE(ComputePlan(s, x).fits);

    ASSERT_GT(p.max_context_at_concurrency, 0);
    ASSERT_FALSE(p.max_context_capped);
    x = o;
    x.context = p.max_context_at_concurrency;
    EXPECT_TRUE(ComputePlan(s, x).fits);
    x.context += 1;
    EXPECT_FALSE(ComputePlan(s, x).fits);
    // Consistency: the plan fits iff the given values are within both maxima.
    EXPECT_EQ(p.fits, c.concurrency <= p.max_concurrency_at_context);
    EXPECT_EQ(p.fits, c.context <= p.max_context_at_concurrency);
  }
}

TEST(Plan, MaxContextCappedAtModelMax) {
  PlanOptions o = H100(1024, 1);
  o.device = *ResolveDevice("h200");
  const MemoryPlan p = ComputePlan(P("Llama-3.2-1B"), o);
  EXPECT_TRUE(p.fits);
  EXPECT_TRUE(p.max_context_capped);
  EXPECT_EQ(p.max_context_at_concurrency, 131072);
  EXPECT_TRUE(p.suggestions.empty());
}

TEST(Plan, SuggestionsNameTheSavings) {
  PlanOptions o = H100(32768, 16);
  const MemoryPlan p = ComputePlan(P("Llama-3.1-8B"), o);
  ASSERT_FALSE(p.fits);
  auto has = [&](const std::string& needle) {
    for (const std::string& s : p.suggestions) {
      if (s.find(needle) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("quantizing weights to q4_k_m saves"));
  EXPECT_TRUE(has("KV q8_0 saves 30.00 GiB"));  // 64 GiB x (1 - 34/64)
  EXPECT_FALSE(has("KV q4_0"));  // q8_0 is enough: 4-bit KV is not offered
  EXPECT_TRUE(has(fmt::format("concurrency {} fits", p.max_concurrency_at_context)));
  EXPECT_TRUE(has(fmt::format("context {} fits", p.max_context_at_concurrency)));
  EXPECT_TRUE(has(fmt::format("use {} devices", p.devices_needed)));

  // On a 24 GB card not one 32K sequence fits next to 16 GB of bf16 weights.
  o.device = *ResolveDevice("a10");
  const MemoryPlan small = ComputePlan(P("Llama-3.1-8B"), o);
  EXPECT_EQ(small.max_concurrency_at_context, 0);
  bool none = false;
  bool q4 = false;
  for (const std::string& s : small.suggestions) {
    none |= s.find("not even one sequence") != std::string::npos;
    // q8_0 KV alone does not fit here: 4-bit is offered, 64 GiB x (1 - 18/64) saved.
    q4 |= s.find("KV q4_0 saves 46.00 GiB") != std::string::npos;
  }
  EXPECT_TRUE(none);
  EXPECT_TRUE(q4);
}

TEST(Plan, ValidateOptionsRejectsBadInput) {
  PlanOptions o;
  EXPECT_TRUE(ValidateOptions(o).ok());
  auto bad = [](auto&& change) {
    PlanOptions x;
    change(x);
    return !ValidateOptions(x).ok();
  };
  EXPECT_TRUE(bad([](PlanOptions& x) { x.concurrency = 0; }));
  EXPECT_TRUE(bad([](PlanOptions& x) { x.context = -1; }));
  EXPECT_TRUE(bad([](PlanOptions& x) { x.block_size = 24; }));
  EXPECT_TRUE(bad([](PlanOptions& x) { x.devices = 0; }));
  EXPECT_TRUE(bad([](PlanOptions& x) { x.memory_fraction = 1.5; }));
  EXPECT_TRUE(bad([](PlanOptions& x) { x.memory_fraction = 0; }));
  EXPECT_TRUE(bad([](PlanOptions& x) { x.kv_dtype = DType::kQ4_K; }));
  EXPECT_TRUE(ParseKvDType("q8_0").ok());
  EXPECT_TRUE(ParseKvDType("q4_0").ok());
  EXPECT_TRUE(ParseKvDType("q4_1").ok());
  EXPECT_FALSE(ParseKvDType("q4_k").ok());
}

TEST(Server, KvPoolAndBlocks) {
  const ModelShape s = P("Llama-3.1-8B");
  const uint64_t gib = uint64_t{1} << 30;
  EXPECT_EQ(KvPoolBytes(100 * gib, 0.9, 16 * gib, 2 * gib, 1 * gib), 71 * gib);
  EXPECT_EQ(KvPoolBytes(10 * gib, 1.0, 16 * gib, 0, 0), 0u);
  // 64 GiB of f16 KV in blocks of 16 tokens x 128 KiB = 2 MiB per block.
  EXPECT_EQ(KvBytesPerBlock(s, DType::kF16, 16), uint64_t{2} << 20);
  EXPECT_EQ(NumKvBlocks(64 * gib, s, DType::kF16, 16), 32768);
  EXPECT_EQ(NumKvBlocks(64 * gib - 1, s, DType::kF16, 16), 32767);
}

TEST(Device, ParseBytesAndPresets) {
  EXPECT_EQ(*ParseBytes("24GiB"), uint64_t{24} << 30);
  EXPECT_EQ(*ParseBytes("24 gib"), uint64_t{24} << 30);
  EXPECT_EQ(*ParseBytes("80GB"), 80'000'000'000u);
  EXPECT_EQ(*ParseBytes("141e9"), 141'000'000'000u);
  EXPECT_EQ(*ParseBytes("1.5TB"), 1'500'000'000'000u);
  EXPECT_EQ(*ParseBytes("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  for (const char* bad : {"", "0", "-5GB", "abc", "12XB", "GB", "1e"}) {
    EXPECT_FALSE(ParseBytes(bad).ok()) << bad;
  }
  EXPECT_EQ(ResolveDevice("h200")->bytes, 141'000'000'000u);
  EXPECT_EQ(ResolveDevice("H100-80G")->bytes, 80'000'000'000u);
  EXPECT_EQ(ResolveDevice("a100-40g")->bytes, 40'000'000'000u);
  EXPECT_EQ(ResolveDevice("l40s")->bytes, 48'000'000'000u);
  EXPECT_EQ(ResolveDevice("rtx4090")->bytes, 24'000'000'000u);
  EXPECT_EQ(ResolveDevice("cpu:24GiB")->bytes, uint64_t{24} << 30);
  EXPECT_EQ(ResolveDevice("96GB")->bytes, 96'000'000'000u);
  EXPECT_EQ(ResolveDevice("nope").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ResolveDevice("cpu:0").ok());
}

TEST(Device, SystemMemoryFromMeminfoAndCgroup) {
  const auto root = kvs::testing::TempDir("plan_sysmem");
  std::filesystem::create_directories(root / "proc");
  std::filesystem::create_directories(root / "sys/fs/cgroup");
  std::ofstream(root / "proc/meminfo") << "MemTotal:       16777216 kB\nMemFree:         1234 kB\n";
  EXPECT_EQ(*SystemMemoryBytes(root.string()), uint64_t{16} << 30);
  std::ofstream(root / "sys/fs/cgroup/memory.max") << "max\n";
  EXPECT_EQ(*SystemMemoryBytes(root.string()), uint64_t{16} << 30);
  std::ofstream(root / "sys/fs/cgroup/memory.max") << "8589934592\n";
  EXPECT_EQ(*SystemMemoryBytes(root.string()), uint64_t{8} << 30);
  std::ofstream(root / "sys/fs/cgroup/memory.max") << "68719476736\n";  // above MemTotal: ignored
  EXPECT_EQ(*SystemMemoryBytes(root.string()), uint64_t{16} << 30);
  std::filesystem::remove_all(root);
  EXPECT_FALSE(SystemMemoryBytes(root.string()).ok());
  StatusOr<uint64_t> real = SystemMemoryBytes();
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_GT(*real, uint64_t{1} << 26);
}

TEST(HfConfig, ParsesAndMatchesPreset) {
  const auto dir = kvs::testing::TempDir("plan_hf");
  const auto path = dir / "config.json";
  std::ofstream(path) << R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
    "max_position_embeddings": 131072, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "sliding_window": null, "rope_theta": 1000000.0
  })";
  StatusOr<ModelShape> s = ShapeFromHfConfig(path.string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const ModelShape want = P("Qwen2.5-7B");
  EXPECT_EQ(s->layers, want.layers);
  EXPECT_EQ(s->hidden, want.hidden);
  EXPECT_EQ(s->heads, want.heads);
  EXPECT_EQ(s->kv_heads, want.kv_heads);
  EXPECT_EQ(s->head_dim, 128);
  EXPECT_EQ(s->ffn, want.ffn);
  EXPECT_EQ(s->vocab, want.vocab);
  EXPECT_EQ(s->max_context, want.max_context);
  EXPECT_TRUE(s->qkv_bias);
  EXPECT_EQ(s->params, 7'615'616'512);
  EXPECT_EQ(s->default_format, WeightFormat::kBF16);
  EXPECT_EQ(KvBytesPerToken(*s, DType::kF16), 57344u);

  // Defaults: kv heads = heads, explicit head_dim, tied, f16 dtype.
  StatusOr<ModelShape> t = ShapeFromHfConfigText(R"({"num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "head_dim": 32, "intermediate_size": 128, "vocab_size": 100,
      "max_position_embeddings": 512, "tie_word_embeddings": true, "torch_dtype": "float16"})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->kv_heads, 4);
  EXPECT_EQ(t->head_dim, 32);
  EXPECT_TRUE(t->tied_embeddings);
  EXPECT_EQ(t->default_format, WeightFormat::kF16);
  // embd 100x64 + per layer (norms 2x64, q 128x64, k,v 128x64 each, o 64x128, mlp 3x128x64) + norm 64
  EXPECT_EQ(t->params, 6400 + 2 * (128 + 4 * 8192 + 3 * 8192) + 64);

  EXPECT_FALSE(ShapeFromHfConfigText("not json").ok());
  EXPECT_FALSE(ShapeFromHfConfigText(R"({"hidden_size": 64})").ok());  // missing keys
  EXPECT_FALSE(ShapeFromHfConfigText(R"({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 3,
      "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
      "max_position_embeddings": 512})").ok());  // heads not a multiple of kv heads
  EXPECT_EQ(ShapeFromHfConfig((dir / "absent.json").string()).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

// Gemma-3-12B (its published config.json, text part): 40 of 48 layers slide
// over 1024 tokens. kvserve frees their blocks as they leave the window, so
// KV is 8 global layers x 32K + 40 sliding x 65 blocks of 16.
TEST(HfConfig, SlidingWindowLayersOfGemma3AndMistral) {
  StatusOr<ModelShape> g = ShapeFromHfConfigText(R"({"architectures": ["Gemma3ForConditionalGeneration"],
      "model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 3840,
      "intermediate_size": 15360, "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 8,
      "head_dim": 256, "vocab_size": 262208, "max_position_embeddings": 131072, "sliding_window": 1024,
      "sliding_window_pattern": 6, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->arch, "gemma3");
  EXPECT_TRUE(g->tied_embeddings);  // transformers' default for Gemma
  EXPECT_NEAR(static_cast<double>(g->params), 11.77e9, 0.01e9);  // the text model's published ~11.8B
  EXPECT_EQ(g->sliding_window, 1024);
  EXPECT_EQ(g->sliding_layers, 40);
  EXPECT_EQ(KvBytesPerToken(*g, DType::kF16), 393216u);
  const MemoryPlan p = ComputePlan(*g, H100(32768, 16));
  EXPECT_EQ(p.kv_bytes_without_windows, uint64_t{16} * 32768 * 393216);
  const uint64_t layer_token = 2 * 8 * 256 * 2;  // K and V of one layer, f16
  EXPECT_EQ(p.kv_bytes, 16 * layer_token * (8 * 32768 + 40 * 65 * 16));
  EXPECT_EQ(p.kv_bytes, 39'812'333'568u);  // docs/capacity-planning.md
  EXPECT_EQ(p.kv_bytes_windowed, p.kv_bytes);
  EXPECT_EQ(p.kv_bytes_per_token_global, 8 * layer_token);
  EXPECT_EQ(p.kv_bytes_per_token_sliding, 40 * layer_token);
  EXPECT_EQ(p.kv_bytes_per_context_token, 75'936u);  // 8192 x (8 x 32,768 + 40 x 1,040) / 32,768
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes.back().find("40 of 48 layers use a 1024-token sliding window"), std::string::npos) << p.notes.back();
  EXPECT_NE(PlanToText(p).find("sliding 40 layers: 327,680 bytes/token x 65 blocks (window 1024)"), std::string::npos)
      << PlanToText(p);

  // The same with layer_types (newer transformers), and Mistral 7B v0.1:
  // every layer slides over 4096.
  StatusOr<ModelShape> t = ShapeFromHfConfigText(R"({"model_type": "gemma3_text", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4, "vocab_size": 100,
      "max_position_embeddings": 512, "sliding_window": 8,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->sliding_layers, 2);
  StatusOr<ModelShape> m = ShapeFromHfConfigText(R"({"model_type": "mistral", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": 4096})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->sliding_layers, 32);
  EXPECT_EQ(ComputePlan(*m, H100(32768, 1)).kv_bytes_windowed,
            uint64_t{32} * 2 * 8 * 128 * 2 * (4096 + 16 - 1 + 1));  // 257 blocks of 16 = 4112 tokens
  // Phi-3's window is not applied (as llama.cpp), nor a null one.
  StatusOr<ModelShape> phi = ShapeFromHfConfigText(R"({"model_type": "phi3", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
      "max_position_embeddings": 512, "sliding_window": 2047})");
  ASSERT_TRUE(phi.ok());
  EXPECT_EQ(phi->sliding_layers, 0);
}

// Qwen3-30B-A3B and Mixtral-8x7B from their published config.json files:
// every expert counts in the weights, a token reads experts_used of them.
// docs/capacity-planning.md works the 32K x 16 case by hand.
TEST(HfConfig, MixtureOfExpertsQwen3_30B_A3BAndMixtral) {
  StatusOr<ModelShape> q = ShapeFromHfConfigText(R"({"architectures": ["Qwen3MoeForCausalLM"],
      "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
      "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
      "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": true, "decoder_sparse_step": 1,
      "mlp_only_layers": [], "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
      "sliding_window": null, "use_sliding_window": false, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16"})");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->experts, 128);
  EXPECT_EQ(q->experts_used, 8);
  EXPECT_EQ(q->expert_ffn, 768);
  EXPECT_EQ(q->shared_expert_ffn, 0);
  EXPECT_TRUE(q->qk_norm);
  EXPECT_FALSE(q->qkv_bias);
  EXPECT_EQ(q->sliding_layers, 0);
  // By hand: embeddings and output 2 x 151936 x 2048; per layer attention
  // q,o 2 x 4096 x 2048, k,v 2 x 512 x 2048, norms 2 x 2048 + 2 x 128,
  // router 128 x 2048, experts 128 x 3 x 768 x 2048; final norm 2048.
  const int64_t layer_dense = 2 * 4096 * 2048 + 2 * 512 * 2048 + 2 * 2048 + 2 * 128 + 128 * 2048;
  const int64_t layer_experts = int64_t{128} * 3 * 768 * 2048;
  EXPECT_EQ(q->params, 2 * int64_t{151936} * 2048 + 48 * (layer_dense + layer_experts) + 2048);
  EXPECT_NEAR(static_cast<double>(q->params) / 1e9, 30.5, 0.05);         // "30.5B"
  EXPECT_NEAR(static_cast<double>(q->active_params) / 1e9, 3.3, 0.06);   // "3.3B activated"
  EXPECT_EQ(q->params - q->active_params, 48 * int64_t{120} * 3 * 768 * 2048);
  const ModelShape preset = P("Qwen3-30B-A3B");
  EXPECT_EQ(preset.params, q->params);
  EXPECT_EQ(preset.active_params, q->active_params);
  // 32K x 16 on one H100: KV 2 x 48 x 4 x 128 x 2 = 98304 bytes a token,
  // 48 GiB in all; bf16 weights 2 bytes x 30.5B (all experts) = 61.1 GB.
  EXPECT_EQ(KvBytesPerToken(*q, DType::kF16), 98304u);
  const MemoryPlan p = ComputePlan(*q, H100(32768, 16));
  EXPECT_EQ(p.kv_bytes, uint64_t{16} * 32768 * 98304);
  EXPECT_EQ(p.weights_bytes, 2 * static_cast<uint64_t>(q->params));
  EXPECT_FALSE(p.fits);  // 61 GB + 51.5 GB > 80 GB
  EXPECT_EQ(p.devices_needed, 2);
  PlanOptions small = H100(32768, 16);  // q4_k_m weights and q8_0 KV: one card
  small.weights_format = WeightFormat::kQ4_K_M;
  small.kv_dtype = DType::kQ8_0;
  EXPECT_TRUE(ComputePlan(*q, small).fits);
  // MoE scratch: router probabilities, gathered rows, one expert's gate/up.
  EXPECT_EQ(p.activations.mlp, uint64_t{2048} * (128 + 2 * 2048 + 2 * 768) * 4);
  const nlohmann::json j = PlanToJson(p);
  EXPECT_EQ(j["model"]["experts"].get<int64_t>(), 128);
  EXPECT_EQ(j["model"]["active_params"].get<int64_t>(), q->active_params);
  EXPECT_NE(PlanToText(p).find("8 of 128 experts of FFN 768"), std::string::npos) << PlanToText(p);

  StatusOr<ModelShape> m = ShapeFromHfConfigText(R"({"architectures": ["MixtralForCausalLM"],
      "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_experts_per_tok": 2,
      "vocab_size": 32000, "max_position_embeddings": 32768, "sliding_window": null, "rope_theta": 1000000.0,
      "tie_word_embeddings": false, "torch_dtype": "bfloat16"})");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->experts, 8);
  EXPECT_EQ(m->experts_used, 2);
  EXPECT_EQ(m->expert_ffn, 14336);  // Mixtral's experts are intermediate_size wide
  EXPECT_NEAR(static_cast<double>(m->params) / 1e9, 46.7, 0.05);          // "46.7B"
  EXPECT_NEAR(static_cast<double>(m->active_params) / 1e9, 12.9, 0.05);   // "12.9B active"
  EXPECT_EQ(P("Mixtral-8x7B").params, m->params);

  // qwen2_moe: the shared expert, QKV bias by default.
  StatusOr<ModelShape> s = ShapeFromHfConfigText(R"({"model_type": "qwen2_moe", "hidden_size": 64,
      "intermediate_size": 128, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96,
      "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100, "max_position_embeddings": 512})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->qkv_bias);
  // Per layer: norms 2x64, q/k/v/o 4x64x64, biases 3x64, router 4x64,
  // experts 4x3x32x64, shared gate 64, shared 3x96x64.
  EXPECT_EQ(s->params, 100 * 64 * 2 + 64 + 2 * (2 * 64 + 4 * 4096 + 3 * 64 + 4 * 64 + 4 * 3 * 32 * 64 + 64 + 3 * 96 * 64));
  EXPECT_EQ(s->params - s->active_params, 2 * 2 * 3 * 32 * 64);
  EXPECT_FALSE(ShapeFromHfConfigText(R"({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 512,
      "num_local_experts": 8, "num_experts_per_tok": 9})").ok());  // more used than there are
}

// A GGUF MoE file: the tensor table gives parameters and bytes, the
// metadata the experts; active parameters leave out the unselected experts.
// Also for the old Mixtral layout (one tensor per expert).
class GgufMoe : public ::testing::TestWithParam<bool> {};

TEST_P(GgufMoe, MixtureOfExpertsFileCountsEveryExpert) {
  const auto dir = kvs::testing::TempDir("plan_moe");
  const std::string path = (dir / "m.gguf").string();
  model::RandomModelSpec spec;
  spec.split_experts = GetParam();
  spec.arch = spec.split_experts ? "llama" : "qwen3moe";
  spec.hidden = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.ffn = 128;
  spec.vocab = 100;
  spec.n_experts = 4;
  spec.n_experts_used = 2;
  spec.expert_ffn = 32;
  ASSERT_TRUE(model::WriteRandomModel(spec, path, "").ok());
  StatusOr<ModelShape> s = ShapeFromGguf(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->arch, spec.arch);
  EXPECT_EQ(s->experts, 4);
  EXPECT_EQ(s->experts_used, 2);
  EXPECT_EQ(s->expert_ffn, 32);
  EXPECT_EQ(s->params, ParamsFromShape(*s));  // the shapes account for every tensor
  EXPECT_EQ(s->params - s->active_params, 2 * 2 * 3 * 32 * 64);
  EXPECT_EQ(s->file_weights_bytes, WeightBytesFromShape(*s, WeightFormat::kF32));
  std::filesystem::remove_all(dir);
}
INSTANTIATE_TEST_SUITE_P(Gguf, GgufMoe, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "SplitExperts" : "ExpertTensors"; });

// 4 GiB at fraction 0.5, 1000 sequences of 1000 tokens, blocks of 16,
// steps of 256 tokens / 8 sequences, 2 threads.
ServingPlanOptions HalfOf4GiBOptions() {
  ServingPlanOptions o;
  o.memory_limit_bytes = uint64_t{4} << 30;
  o.memory_fraction = 0.5;
  o.context = 1000;
  o.sequences = 1000;
  o.block_size = 16;
  o.max_num_batched_tokens = 256;
  o.max_batch_size = 8;
  o.threads = 2;
  return o;
}

// The KV pool of a running server: what the accounts leave, in whole
// blocks, capped at what max_concurrent_requests sequences could use.
TEST(Serving, PoolIsWhatTheAccountsLeaveInWholeBlocks) {
  const ModelShape s = P("test-125m");
  ServingPlanOptions o = HalfOf4GiBOptions();
  const uint64_t weights = 250'000'000;
  StatusOr<ServingPlan> p = PlanServing(s, weights, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const uint64_t act = ActivationPeakBytes(s, 256, 8, 1000, 2);
  const uint64_t pool = KvPoolBytes(o.memory_limit_bytes, 0.5, weights, act, RuntimeOverheadBytes(2));
  EXPECT_EQ(p->kv_blocks_fit, NumKvBlocks(pool, s, DType::kF16, 16));
  EXPECT_EQ(p->num_kv_blocks, p->kv_blocks_fit);  // 1000 sequences would want more
  EXPECT_EQ(p->kv_blocks_per_sequence, 63);
  EXPECT_EQ(p->kv_pool_bytes, static_cast<uint64_t>(p->num_kv_blocks) * KvBytesPerBlock(s, DType::kF16, 16));
  EXPECT_EQ(p->SequencesAtContext(), p->kv_blocks_fit / 63);
  // Few sequences: capped at what they can use.
  o.sequences = 2;
  EXPECT_EQ(PlanServing(s, weights, o)->num_kv_blocks, 126);
  // Not one sequence fits: refused, naming the keys to change.
  o.memory_fraction = 0.07;
  const Status st = PlanServing(s, weights, o).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("kv_cache.memory_fraction"), std::string::npos) << st.ToString();
}

// A model with sliding layers: their window group is sized first (every
// running sequence's window and a step), the global layers get the rest.
TEST(Serving, SlidingLayersGetAWindowGroupSizedForTheBatch) {
  ModelShape s = P("test-125m");
  s.sliding_window = 64;
  s.sliding_layers = s.layers - 2;
  ServingPlanOptions o = HalfOf4GiBOptions();
  const uint64_t weights = 250'000'000;
  StatusOr<ServingPlan> p = PlanServing(s, weights, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const uint64_t layer_block = 2 * 16 * KvRowBytes(s, DType::kF16);
  EXPECT_EQ(p->window, 64);
  EXPECT_EQ(p->num_window_blocks, 8 * (4 + 2) + 16);  // 8 x (ceil(63 / 16) + 2) + 256 / 16
  EXPECT_EQ(p->kv_bytes_per_window_block, static_cast<uint64_t>(s.layers - 2) * layer_block);
  EXPECT_EQ(p->kv_bytes_per_block, 2 * layer_block);
  const uint64_t act = ActivationPeakBytes(s, 256, 8, 1000, 2);
  const uint64_t pool = KvPoolBytes(o.memory_limit_bytes, 0.5, weights, act, RuntimeOverheadBytes(2));
  EXPECT_EQ(p->kv_blocks_fit,
            static_cast<int64_t>((pool - 64 * p->kv_bytes_per_window_block) / p->kv_bytes_per_block));
  EXPECT_EQ(p->num_kv_blocks, p->kv_blocks_fit);
  EXPECT_GT(p->num_kv_blocks, 5 * NumKvBlocks(pool, s, DType::kF16, 16)) << "blocks of 2 of 12 layers are cheap";
  EXPECT_NE(p->Describe(DType::kF16).find("64 sliding-window blocks"), std::string::npos) << p->Describe(DType::kF16);
  // Every layer sliding: the global blocks are bookkeeping, one full context per sequence.
  s.sliding_layers = s.layers;
  p = PlanServing(s, weights, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kv_bytes_per_block, 0u);
  EXPECT_EQ(p->num_kv_blocks, 1000 * 63);
  EXPECT_EQ(p->kv_pool_bytes, 64 * p->kv_bytes_per_window_block);
  // A window as long as the context: one group, as without sliding layers.
  s.sliding_window = 1000;
  EXPECT_EQ(PlanServing(s, weights, o)->window, 0);
}

// A draft model (speculative decoding): its weights and activations come
// off the pool, and every block also holds its KV (the same block ids).
TEST(Serving, ADraftModelSharesEveryBlock) {
  const ModelShape s = P("test-125m");
  ModelShape d = s;
  d.layers = 2;
  d.kv_heads = s.kv_heads / 2 > 0 ? s.kv_heads / 2 : 1;
  ServingPlanOptions o = HalfOf4GiBOptions();
  const uint64_t weights = 250'000'000, draft_weights = 40'000'000;
  o.draft = &d;
  o.draft_weights_bytes = draft_weights;
  StatusOr<ServingPlan> p = PlanServing(s, weights, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const uint64_t act = ActivationPeakBytes(s, 256, 8, 1000, 2) + ActivationPeakBytes(d, 256, 8, 1000, 2);
  const uint64_t pool = KvPoolBytes(o.memory_limit_bytes, 0.5, weights + draft_weights, act, RuntimeOverheadBytes(2));
  const uint64_t per_block = KvBytesPerBlock(s, DType::kF16, 16) + KvBytesPerBlock(d, DType::kF16, 16);
  EXPECT_EQ(p->weights_bytes, weights + draft_weights);
  EXPECT_EQ(p->draft_weights_bytes, draft_weights);
  EXPECT_EQ(p->activation_bytes, act);
  EXPECT_EQ(p->draft_kv_bytes_per_block, KvBytesPerBlock(d, DType::kF16, 16));
  EXPECT_EQ(p->kv_bytes_per_block, per_block);
  EXPECT_EQ(p->kv_blocks_fit, static_cast<int64_t>(pool / per_block));
  o.draft = nullptr;
  o.draft_weights_bytes = 0;
  EXPECT_GT(PlanServing(s, weights, o)->kv_blocks_fit, p->kv_blocks_fit);
  EXPECT_NE(p->Describe(DType::kF16).find("draft model"), std::string::npos) << p->Describe(DType::kF16);
}

TEST(Gguf, Stories260KWeightsAreTheTensorSizes) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  StatusOr<ModelShape> s = ShapeFromGguf(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto file = gguf::GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  uint64_t sum = 0;
  int64_t params = 0;
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    sum += t.nbytes;
    params += t.NumElements();
  }
  EXPECT_EQ(s->file_weights_bytes, sum);
  EXPECT_EQ(s->params, params);
  EXPECT_EQ(s->layers, 5);
  EXPECT_EQ(s->hidden, 64);
  EXPECT_EQ(s->heads, 8);
  EXPECT_EQ(s->kv_heads, 4);
  EXPECT_EQ(s->head_dim, 8);
  EXPECT_EQ(s->ffn, 172);
  EXPECT_EQ(s->vocab, 512);
  EXPECT_EQ(s->max_context, 2048);
  const MemoryPlan p = ComputePlan(*s, H100(512, 2));
  EXPECT_EQ(p.weights_bytes, sum);
  EXPECT_EQ(p.kv_bytes_per_token, 2u * 5 * 4 * 8 * 2);
  EXPECT_TRUE(p.fits);
  EXPECT_FALSE(ShapeFromGguf("/nonexistent/model.gguf").ok());
}

// Runs the built kvserve binary; returns its exit status and stdout.
std::pair<int, std::string> RunCli(const std::string& args) {
  const std::string bin = kvs::testing::BinaryDir() + "/src/cli/kvserve";
  const std::string cmd = bin + " plan " + args + " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return {-1, ""};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(Cli, JsonOutputHasTheKeys) {
  if (!std::filesystem::exists(kvs::testing::BinaryDir() + "/src/cli/kvserve")) {
    GTEST_SKIP() << "kvserve is not built in " << kvs::testing::BinaryDir() << "; skipping";
  }
  auto [rc, out] = RunCli("--preset Llama-3.1-8B --context 32768 --concurrency 16 --device h100-80g --json");
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  for (const char* key : {"weights_bytes", "kv_bytes_per_token", "kv_bytes", "activation_bytes", "total_bytes", "fits",
                          "devices_needed", "max_concurrency_at_context", "max_context_at_concurrency", "suggestions",
                          "context", "concurrency", "kv_dtype", "weights_dtype", "device", "device_bytes", "inputs",
                          "model"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["kv_bytes"].get<uint64_t>(), 68'719'476'736u);
  EXPECT_EQ(j["kv_bytes_per_token"].get<uint64_t>(), 131072u);
  EXPECT_EQ(j["weights_bytes"].get<uint64_t>(), 16'060'522'496u);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_EQ(j["devices_needed"].get<int64_t>(), 2);
  EXPECT_TRUE(j["suggestions"].is_array());
  EXPECT_FALSE(j["suggestions"].empty());

  auto [rc_text, text] = RunCli("--preset test-125m --device cpu:8GiB");
  EXPECT_EQ(rc_text, 0);
  EXPECT_NE(text.find("fits         yes"), std::string::npos) << text;

  for (const char* bad : {"--preset nope", "--preset Llama-3.1-8B --device nope", "--preset Llama-3.1-8B --concurrency 0",
                          "--preset Llama-3.1-8B --context -5", "--preset Llama-3.1-8B --context abc",
                          "--preset Llama-3.1-8B --memory-fraction 1.5", "--model /nonexistent/x.gguf",
                          "--hf-config /nonexistent/config.json", "", "--preset test-125m --hf-config x.json",
                          "--preset test-125m --kv-dtype q4_k", "--preset test-125m --block-size 24",
                          "--preset test-125m --device cpu:0"}) {
    EXPECT_EQ(RunCli(bad).first, 2) << bad;
  }
}

// `--tensor-parallel` / `--pipeline-parallel`: a per-rank plan, and a
// layout the heads do not allow refused with exit 2 naming the limit.
TEST(Cli, ParallelLayoutAddsAPerRankPlan) {
  if (!std::filesystem::exists(kvs::testing::BinaryDir() + "/src/cli/kvserve")) {
    GTEST_SKIP() << "kvserve is not built in " << kvs::testing::BinaryDir() << "; skipping";
  }
  auto [rc, out] = RunCli("--preset Llama-3.1-70B --weights-dtype q4_k_m --device cpu:24GiB --context 8192 "
                          "--threads 8 --tensor-parallel 2 --pipeline-parallel 2 --json");
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_TRUE(j.contains("parallel")) << out;
  const nlohmann::json& par = j["parallel"];
  ASSERT_EQ(par["ranks"].size(), 4u);
  EXPECT_TRUE(par["fits"].get<bool>());
  EXPECT_TRUE(j.contains("weights_bytes"));  // the whole-model plan is still there
  EXPECT_EQ(j["devices"], 4);
  uint64_t kv = 0;
  for (const auto& r : par["ranks"]) kv += r["kv_bytes"].get<uint64_t>();
  EXPECT_EQ(kv, j["kv_bytes"].get<uint64_t>());  // sharded: the ranks' KV adds up to the model's

  auto [rc_text, text] = RunCli("--preset Llama-3.1-70B --weights-dtype q4_k_m --device cpu:24GiB --context 8192 "
                                "--threads 8 --tensor-parallel 1");
  EXPECT_EQ(rc_text, 0);
  EXPECT_NE(text.find("NO: rank 0 (stage 0, tp 0) needs"), std::string::npos) << text;

  EXPECT_EQ(RunCli("--preset Llama-3.1-8B --tensor-parallel 3").first, 2);
  EXPECT_EQ(RunCli("--preset Llama-3.1-8B --pipeline-parallel 0").first, 2);
  EXPECT_EQ(RunCli("--preset Llama-3.1-8B --tensor-parallel 2 --devices 2").first, 2);
}

}  // namespace
}  // namespace kvs::plan
