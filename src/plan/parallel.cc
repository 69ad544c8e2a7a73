#include "plan/parallel.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace kvs::plan {
namespace {

int64_t CeilDivI(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What one rank holds of the model: the shape of its slice (layers, heads,
// columns, vocabulary rows) and which of the unrepeated tensors.
struct Slice {
  ModelShape shape;  // layers, kv_heads, heads, ffn, expert widths, vocab, sliding_layers: the rank's
  bool embeddings = false, output_head = false, head_copy = false;
};

// Parameters of `layers` layers of s (with s's heads and widths) and of the
// tensors outside the layers that the slice holds.
int64_t SliceParams(const ModelShape& s, const Slice& slice, int64_t router_experts) {
  const int64_t hd = s.head_dim, h = s.hidden;
  int64_t layer = h * hd * s.heads * 2            // q, o
                  + h * hd * s.kv_heads * 2       // k, v
                  + 2 * h;                        // attn_norm, ffn_norm
  if (s.qkv_bias) layer += hd * (s.heads + 2 * s.kv_heads);
  if (s.qk_norm) layer += 2 * hd;
  if (router_experts > 0) {
    layer += router_experts * h  // router, whole on every rank
             + router_experts * 3 * h * s.expert_ffn;
    if (s.shared_expert_ffn > 0) layer += 3 * h * s.shared_expert_ffn + h;
  } else {
    layer += 3 * h * s.ffn;  // gate, up, down
  }
  int64_t p = slice.shape.layers * layer;
  if (slice.embeddings) p += s.vocab * h;
  if (slice.output_head) p += h + (slice.head_copy ? s.vocab * h : 0);  // output_norm (+ head or tied copy)
  return p;
}

// Layers of stage `stage`: the first layers % stages stages hold one more.
std::pair<int64_t, int64_t> StageLayers(int64_t layers, int64_t stages, int64_t stage) {
  const int64_t base = layers / stages, extra = layers % stages;
  const int64_t first = stage * base + std::min(stage, extra);
  return {first, base + (stage < extra ? 1 : 0)};
}

// Sliding layers among [first, first + n) when the model's are spread
// evenly over its layers (the pattern itself is not in the shape).
int64_t SlidingIn(const ModelShape& s, int64_t first, int64_t n) {
  auto upto = [&](int64_t l) {
    return static_cast<int64_t>(std::llround(static_cast<double>(s.sliding_layers) * static_cast<double>(l) /
                                             static_cast<double>(s.layers)));
  };
  return upto(first + n) - upto(first);
}

struct Accounts {
  uint64_t weights = 0, kv = 0, activations = 0, overhead = 0;
  uint64_t Total() const { return weights + kv + activations + overhead; }
};

Accounts RankAccounts(const ModelShape& model, const Slice& slice, int64_t params, int64_t total_params,
                      uint64_t total_weight_bytes, const PlanOptions& o, bool samples, bool last_stage, bool alone) {
  Accounts a;
  a.weights = static_cast<uint64_t>(std::llround(static_cast<double>(total_weight_bytes) * static_cast<double>(params) /
                                                 static_cast<double>(total_params)));
  a.kv = KvBytesWindowed(slice.shape, o.kv_dtype, o.block_size, o.context, o.concurrency);
  ActivationBreakdown act = Activations(slice.shape, StepTokens(o), o.max_batch_size, o.context, o.threads);
  if (!last_stage) act.logits = 0;
  // Rank 0 samples from the whole [B, vocab] f32 logits, gathered from the
  // last stage's slices (one rank alone holds them already).
  if (samples && !alone) act.logits += static_cast<uint64_t>(o.max_batch_size * model.vocab) * 4;
  a.activations = act.Total();
  a.overhead = RuntimeOverheadBytes(o.threads);
  return a;
}

std::string RankName(const RankPlan& r) {
  return fmt::format("rank {} (stage {}, tp {})", r.rank, r.stage, r.tp_rank);
}

// The plan for o's concurrency; `shortfall` only when it does not fit.
ParallelPlan Compute(const ModelShape& shape, const PlanOptions& o, const ParallelLayout& layout) {
  ParallelPlan p;
  p.layout = layout;
  p.options = o;
  const int64_t tp = layout.tensor, pp = layout.pipeline;
  p.kv_head_replicas = shape.kv_heads >= tp ? 1 : tp / shape.kv_heads;
  p.budget_per_rank_bytes = static_cast<uint64_t>(static_cast<double>(o.device.bytes) * o.memory_fraction);

  Slice whole;
  whole.shape = shape;
  whole.embeddings = true;
  whole.output_head = true;
  whole.head_copy = !shape.tied_embeddings;
  const int64_t total_params = SliceParams(shape, whole, shape.experts);
  const uint64_t total_weight_bytes = WeightBytes(shape, o);

  p.fits = true;
  double worst_over = -1;
  for (int64_t stage = 0; stage < pp; ++stage) {
    const auto [first, n] = StageLayers(shape.layers, pp, stage);
    for (int64_t t = 0; t < tp; ++t) {
      RankPlan r;
      r.rank = stage * tp + t;
      r.stage = stage;
      r.tp_rank = t;
      r.first_layer = first;
      r.num_layers = n;
      Slice slice;
      slice.shape = shape;
      ModelShape& s = slice.shape;
      s.layers = n;
      s.sliding_layers = SlidingIn(shape, first, n);
      s.heads = shape.heads / tp;
      s.kv_heads = model::KvHeadsPerRank(shape.kv_heads, tp);
      s.ffn = CeilDivI(shape.ffn, tp);
      s.expert_ffn = CeilDivI(shape.expert_ffn, tp);
      s.shared_expert_ffn = CeilDivI(shape.shared_expert_ffn, tp);
      s.vocab = CeilDivI(shape.vocab, tp);
      slice.embeddings = stage == 0;
      slice.output_head = stage == pp - 1;
      // The head's matrix: its own when untied; when tied, the embedding
      // slice serves it on a single stage and is copied to the last one.
      slice.head_copy = !shape.tied_embeddings || pp > 1;
      r.heads = s.heads;
      r.kv_heads = s.kv_heads;
      r.ffn = s.experts > 0 ? s.expert_ffn : s.ffn;
      r.vocab = s.vocab;
      r.embeddings = slice.embeddings;
      r.output_head = slice.output_head;
      r.samples = r.rank == 0;
      // The slice's own parameters are counted with the per-rank widths;
      // its shape's vocab is the slice's rows.
      r.params = SliceParams(s, slice, shape.experts);
      const Accounts a = RankAccounts(shape, slice, r.params, total_params, total_weight_bytes, o, r.samples,
                                      slice.output_head, layout.ranks() == 1);
      r.weights_bytes = a.weights;
      r.kv_bytes = a.kv;
      r.activation_bytes = a.activations;
      r.overhead_bytes = a.overhead;
      r.total_bytes = a.Total();
      r.fits = FitsBudget(r.total_bytes, o);
      if (!r.fits) {
        p.fits = false;
        const double need = static_cast<double>(r.total_bytes) * (1.0 + o.margin);
        const double over = need - static_cast<double>(p.budget_per_rank_bytes);
        if (over > worst_over) {
          worst_over = over;
          p.shortfall = fmt::format("{} needs {} with {:.0f} % margin, budget {}: {} short", RankName(r),
                                    FormatBinary(static_cast<uint64_t>(need)), o.margin * 100,
                                    FormatBinary(p.budget_per_rank_bytes), FormatBinary(static_cast<uint64_t>(over)));
        }
      }
      p.ranks.push_back(r);
    }
  }
  return p;
}

}  // namespace

Status ValidateLayout(const ModelShape& shape, const ParallelLayout& layout) {
  if (layout.tensor < 1 || layout.tensor > kMaxParallel) {
    return InvalidArgument("tensor parallel size must be in [1, {}], got {}", kMaxParallel, layout.tensor);
  }
  if (layout.pipeline < 1 || layout.pipeline > kMaxParallel) {
    return InvalidArgument("pipeline parallel size must be in [1, {}], got {}", kMaxParallel, layout.pipeline);
  }
  if (layout.pipeline > shape.layers) {
    return InvalidArgument("pipeline parallel size {} exceeds the model's {} layers (a stage holds at least one)",
                           layout.pipeline, shape.layers);
  }
  const int64_t tp = layout.tensor;
  if (shape.heads % tp != 0) {
    return InvalidArgument("tensor parallel size {} does not divide the model's {} attention heads", tp, shape.heads);
  }
  if (!model::KvHeadsShareable(shape.kv_heads, tp)) {
    return InvalidArgument(
        "tensor parallel size {} and the model's {} KV heads: the size must divide the KV heads, or be a multiple "
        "of them (each KV head then replicated)",
        tp, shape.kv_heads);
  }
  return Status::Ok();
}

ParallelPlan ComputeParallelPlan(const ModelShape& shape, const PlanOptions& options, const ParallelLayout& layout) {
  const PlanOptions o = ResolveOptions(shape, options);
  ParallelPlan p = Compute(shape, o, layout);
  // The largest concurrency at this context with every rank fitting: the
  // accounts only grow with it.
  auto fits = [&](int64_t c) {
    PlanOptions x = options;
    x.context = o.context;
    x.concurrency = c;
    return Compute(shape, ResolveOptions(shape, x), layout).fits;
  };
  constexpr int64_t kCap = int64_t{1} << 20;
  p.max_concurrency_capped = false;
  if (fits(1)) {
    if (fits(kCap)) {
      p.max_concurrency_at_context = kCap;
      p.max_concurrency_capped = true;
    } else {
      int64_t lo = 1, hi = kCap;
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
      }
      p.max_concurrency_at_context = lo;
    }
  }
  if (p.kv_head_replicas > 1) {
    p.notes.push_back(fmt::format("{} KV heads over tensor parallel {}: each rank holds one KV head, each head on {} "
                                  "ranks (its KV cache replicated as many times)",
                                  shape.kv_heads, layout.tensor, p.kv_head_replicas));
  }
  if (layout.tensor > 1 && shape.ffn % layout.tensor != 0 && shape.experts == 0) {
    p.notes.push_back(fmt::format("FFN width {} is not a multiple of {}: ranks hold {} columns (the last fewer)",
                                  shape.ffn, layout.tensor, CeilDivI(shape.ffn, layout.tensor)));
  }
  if (shape.sliding_layers > 0 && layout.pipeline > 1) {
    p.notes.push_back("sliding-window layers are counted as spread evenly over the stages");
  }
  if (!o.weights_format && shape.file_weights_bytes > 0) {
    p.notes.push_back("a rank's weight bytes are the file's times its share of the parameters");
  }
  return p;
}

nlohmann::json ParallelPlanToJson(const ParallelPlan& p) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankPlan& r : p.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"stage", r.stage},
                     {"tp_rank", r.tp_rank},
                     {"first_layer", r.first_layer},
                     {"layers", r.num_layers},
                     {"heads", r.heads},
                     {"kv_heads", r.kv_heads},
                     {"ffn", r.ffn},
                     {"vocab", r.vocab},
                     {"embeddings", r.embeddings},
                     {"output_head", r.output_head},
                     {"samples", r.samples},
                     {"params", r.params},
                     {"weights_bytes", r.weights_bytes},
                     {"kv_bytes", r.kv_bytes},
                     {"activation_bytes", r.activation_bytes},
                     {"overhead_bytes", r.overhead_bytes},
                     {"total_bytes", r.total_bytes},
                     {"fits", r.fits}});
  }
  return {{"tensor_parallel", p.layout.tensor},
          {"pipeline_parallel", p.layout.pipeline},
          {"ranks", ranks},
          {"kv_head_replicas", p.kv_head_replicas},
          {"budget_per_rank_bytes", p.budget_per_rank_bytes},
          {"fits", p.fits},
          {"max_concurrency_at_context", p.max_concurrency_at_context},
          {"max_concurrency_capped", p.max_concurrency_capped},
          {"shortfall", p.shortfall},
          {"notes", p.notes}};
}

std::string ParallelPlanToText(const ParallelPlan& p) {
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };
  const PlanOptions& o = p.options;
  line(fmt::format("parallel     tensor {} x pipeline {} = {} ranks, budget {} per rank", p.layout.tensor,
                   p.layout.pipeline, p.layout.ranks(), FormatBinary(p.budget_per_rank_bytes)));
  line(fmt::format("  {:>4} {:>5} {:>3} {:>9} {:>9} {:>10} {:>10} {:>11} {:>10} {:>10}  {}", "rank", "stage", "tp",
                   "layers", "heads/kv", "weights", "KV", "activations", "overhead", "total", "fits"));
  for (const RankPlan& r : p.ranks) {
    std::string extra;
    if (r.embeddings) extra += " embeddings";
    if (r.output_head) extra += " head";
    if (r.samples) extra += " sampler";
    line(fmt::format("  {:>4} {:>5} {:>3} {:>9} {:>9} {:>10} {:>10} {:>11} {:>10} {:>10}  {}{}", r.rank, r.stage,
                     r.tp_rank, fmt::format("{}-{}", r.first_layer, r.first_layer + r.num_layers - 1),
                     fmt::format("{}/{}", r.heads, r.kv_heads), FormatBinary(r.weights_bytes),
                     FormatBinary(r.kv_bytes), FormatBinary(r.activation_bytes), FormatBinary(r.overhead_bytes),
                     FormatBinary(r.total_bytes), r.fits ? "yes" : "NO", extra));
  }
  line(fmt::format("fits         {}", p.fits ? "yes, every rank" : "NO: " + p.shortfall));
  line(fmt::format("max concurrency at context {} (every rank): {}{}", o.context, p.max_concurrency_at_context,
                   p.max_concurrency_capped ? " (search cap)" : ""));
  for (const std::string& n : p.notes) line("note: " + n);
  return out;
}

}  // namespace kvs::plan
