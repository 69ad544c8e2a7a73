#include "plan/plan.h"

#include <algorithm>
#include <cctype>

namespace kvs::plan {
namespace {

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

std::string WeightsDTypeName(const ModelShape& s, const PlanOptions& o) {
  if (o.weights_format) return WeightFormatName(*o.weights_format);
  if (s.file_weights_bytes > 0) return "gguf:" + s.file_weights_type;
  return WeightFormatName(s.default_format);
}

// With the sliding layers' windows applied (plan.h).
uint64_t KvBytes(const ModelShape& s, const PlanOptions& o) {
  return KvBytesWindowed(s, o.kv_dtype, o.block_size, o.context, o.concurrency);
}


uint64_t ActivationBytes(const ModelShape& s, const PlanOptions& o) {
  return ActivationPeakBytes(s, StepTokens(o), o.max_batch_size, o.context, o.threads);
}

uint64_t PerDeviceBytes(uint64_t split, uint64_t replicated, int64_t devices) {
  return CeilDiv(split, U(devices)) + replicated;
}


// Largest v in [1, cap] with fits(v), given fits is monotone (true then
// false); 0 when fits(1) fails. *capped says fits(cap) held.
template <typename F>
int64_t LargestFitting(int64_t cap, F&& fits, bool* capped) {
  *capped = false;
  if (cap < 1 || !fits(1)) return 0;
  if (fits(cap)) {
    *capped = true;
    return cap;
  }
  int64_t lo = 1, hi = cap;  // fits(lo), !fits(hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::string Gib(uint64_t b) { return FormatBinary(b); }

std::string KvName(DType t) {
  std::string n = DTypeName(t);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

// 8.03B, 125.00M, 292.35K parameters.
std::string Count(int64_t n) {
  const double v = static_cast<double>(n);
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", v / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f}M", v / 1e6);
  return fmt::format("{:.2f}K", v / 1e3);
}

}  // namespace

uint64_t WeightBytes(const ModelShape& s, const PlanOptions& o) {
  if (o.weights_format) return WeightBytesFromShape(s, *o.weights_format);
  if (s.file_weights_bytes > 0) return s.file_weights_bytes;
  return WeightBytesFromShape(s, s.default_format);
}

PlanOptions ResolveOptions(const ModelShape& s, PlanOptions o) {
  if (o.context <= 0) o.context = s.max_context;
  if (o.max_batch_size <= 0) o.max_batch_size = o.concurrency;
  return o;
}

int64_t StepTokens(const PlanOptions& o) {
  return std::min(std::max(o.max_num_batched_tokens, o.max_batch_size), o.concurrency * o.context);
}

bool FitsBudget(uint64_t bytes, const PlanOptions& o) {
  return static_cast<double>(bytes) * (1.0 + o.margin) <= static_cast<double>(o.device.bytes) * o.memory_fraction;
}

StatusOr<DType> ParseKvDType(std::string_view name) {
  std::optional<DType> t = DTypeFromName(name);
  if (t && (*t == DType::kF32 || *t == DType::kF16 || *t == DType::kBF16 || *t == DType::kQ8_0 || *t == DType::kQ4_0 ||
            *t == DType::kQ4_1)) {
    return *t;
  }
  return InvalidArgument("unknown KV dtype \"{}\" (f32, f16, bf16, q8_0, q4_0, q4_1)", name);
}

uint64_t KvRowBytes(const ModelShape& s, DType kv_dtype) {
  const DTypeTraits& tr = Traits(kv_dtype);
  return CeilDiv(U(s.kv_heads * s.head_dim), U(tr.block_size)) * U(tr.type_size);
}

uint64_t KvBytesPerToken(const ModelShape& s, DType kv_dtype) { return 2 * U(s.layers) * KvRowBytes(s, kv_dtype); }

uint64_t KvBytesWindowed(const ModelShape& s, DType kv_dtype, int64_t block_size, int64_t context,
                         int64_t concurrency) {
  const uint64_t layer_block = 2 * U(block_size) * KvRowBytes(s, kv_dtype);  // one layer's K and V of a block
  const int64_t full = KvBlocksForTokens(context, block_size);
  const int64_t windowed =
      s.sliding_layers > 0 ? std::min(full, KvBlocksForTokens(s.sliding_window + block_size - 1, block_size)) : full;
  return U(concurrency) * layer_block *
         (U(s.layers - s.sliding_layers) * U(full) + U(s.sliding_layers) * U(windowed));
}

uint64_t KvBytesPerBlock(const ModelShape& s, DType kv_dtype, int64_t block_size) {
  return U(block_size) * KvBytesPerToken(s, kv_dtype);
}

int64_t KvBlocksForTokens(int64_t tokens, int64_t block_size) {
  return tokens <= 0 ? 0 : (tokens + block_size - 1) / block_size;
}

ActivationBreakdown Activations(const ModelShape& s, int64_t chunk_tokens, int64_t logit_rows, int64_t context,
                                int64_t threads) {
  const uint64_t t = U(chunk_tokens);
  const uint64_t f32 = 4;
  ActivationBreakdown a;
  a.hidden_states = 2 * t * U(s.hidden) * f32;                         // [2, T, hidden]
  a.residual = t * U(s.hidden) * f32;                                  // [T, hidden]
  a.qkv = t * U(s.heads + 2 * s.kv_heads) * U(s.head_dim) * f32;       // [T, (h + 2 kvh) * hd]
  a.attention_out = t * U(s.heads) * U(s.head_dim) * f32;             // [T, h * hd]
  a.attention_scratch = U(threads) * U(context) * f32;                // [P, C]
  if (s.experts > 0) {
    // MoeFfn: router probabilities [T, experts], gathered input and output
    // rows [T, hidden] x2, gate and up of the widest expert [T, 2 * width].
    const uint64_t width = U(std::max(s.expert_ffn, s.shared_expert_ffn));
    a.mlp = t * (U(s.experts) + 2 * U(s.hidden) + 2 * width) * f32;
  } else {
    a.mlp = t * 2 * U(s.ffn) * f32;                                    // [T, 2 * ffn]
  }
  a.logits = U(logit_rows) * U(s.vocab) * f32;                         // [B, vocab]
  return a;
}

uint64_t ActivationPeakBytes(const ModelShape& s, int64_t chunk_tokens, int64_t logit_rows, int64_t context,
                             int64_t threads) {
  return Activations(s, chunk_tokens, logit_rows, context, threads).Total();
}

uint64_t RuntimeOverheadBytes(int64_t threads) { return kFixedOverheadBytes + U(threads) * kThreadStackBytes; }

uint64_t KvPoolBytes(uint64_t memory_limit, double fraction, uint64_t weights_bytes, uint64_t activation_bytes,
                     uint64_t overhead_bytes) {
  const double usable = static_cast<double>(memory_limit) * fraction;
  const double used = static_cast<double>(weights_bytes) + static_cast<double>(activation_bytes) +
                      static_cast<double>(overhead_bytes);
  return usable > used ? static_cast<uint64_t>(usable - used) : 0;
}

int64_t NumKvBlocks(uint64_t pool_bytes, const ModelShape& s, DType kv_dtype, int64_t block_size) {
  const uint64_t per_block = KvBytesPerBlock(s, kv_dtype, block_size);
  return per_block == 0 ? 0 : static_cast<int64_t>(pool_bytes / per_block);
}

Status ValidateOptions(const PlanOptions& o) {
  if (o.context < 0) return InvalidArgument("--context must be positive, got {}", o.context);
  if (o.context > (int64_t{1} << 30)) return InvalidArgument("--context {} is implausibly large", o.context);
  if (o.concurrency <= 0) return InvalidArgument("--concurrency must be positive, got {}", o.concurrency);
  if (o.concurrency > (int64_t{1} << 24)) return InvalidArgument("--concurrency {} is implausibly large", o.concurrency);
  if (o.block_size <= 0 || (o.block_size & (o.block_size - 1)) != 0 || o.block_size > 4096) {
    return InvalidArgument("--block-size must be a power of two up to 4096, got {}", o.block_size);
  }
  if (o.max_num_batched_tokens <= 0 || o.max_num_batched_tokens > (int64_t{1} << 24)) {
    return InvalidArgument("--max-num-batched-tokens must be in [1, 2^24], got {}", o.max_num_batched_tokens);
  }
  if (o.max_batch_size < 0 || o.max_batch_size > (int64_t{1} << 24)) {
    return InvalidArgument("--max-batch-size must be positive, got {}", o.max_batch_size);
  }
  if (o.threads <= 0 || o.threads > 4096) return InvalidArgument("--threads must be in [1, 4096], got {}", o.threads);
  if (o.device.bytes == 0) return InvalidArgument("device memory must be positive");
  if (o.devices <= 0 || o.devices > kMaxDevices) {
    return InvalidArgument("--devices must be in [1, {}], got {}", kMaxDevices, o.devices);
  }
  if (!(o.memory_fraction > 0 && o.memory_fraction <= 1)) {
    return InvalidArgument("--memory-fraction must be in (0, 1], got {}", o.memory_fraction);
  }
  if (!(o.margin >= 0 && o.margin < 10)) return InvalidArgument("margin must be in [0, 10), got {}", o.margin);
  if (o.kv_dtype != DType::kF32 && o.kv_dtype != DType::kF16 && o.kv_dtype != DType::kBF16 &&
      o.kv_dtype != DType::kQ8_0 && o.kv_dtype != DType::kQ4_0 && o.kv_dtype != DType::kQ4_1) {
    return InvalidArgument("KV dtype {} is not supported (f32, f16, bf16, q8_0, q4_0, q4_1)", DTypeName(o.kv_dtype));
  }
  return Status::Ok();
}

bool Fits(const ModelShape& shape, const PlanOptions& options) {
  const PlanOptions o = ResolveOptions(shape, options);
  const uint64_t split = WeightBytes(shape, o) + KvBytes(shape, o);
  const uint64_t replicated = ActivationBytes(shape, o) + RuntimeOverheadBytes(o.threads);
  return FitsBudget(PerDeviceBytes(split, replicated, o.devices), o);
}

MemoryPlan ComputePlan(const ModelShape& shape, const PlanOptions& options) {
  MemoryPlan p;
  p.shape = shape;
  const PlanOptions o = ResolveOptions(shape, options);
  p.options = o;
  p.weights_dtype = WeightsDTypeName(shape, o);

  p.weights_bytes = WeightBytes(shape, o);
  p.kv_bytes_per_token = KvBytesPerToken(shape, o.kv_dtype);
  p.kv_bytes_per_block = KvBytesPerBlock(shape, o.kv_dtype, o.block_size);
  p.kv_blocks_per_sequence = KvBlocksForTokens(o.context, o.block_size);
  p.kv_bytes = KvBytes(shape, o);
  p.kv_bytes_windowed = p.kv_bytes;
  p.kv_bytes_without_windows = U(o.concurrency) * U(p.kv_blocks_per_sequence) * p.kv_bytes_per_block;
  const uint64_t layer_token = 2 * KvRowBytes(shape, o.kv_dtype);
  p.kv_bytes_per_token_global = U(shape.layers - shape.sliding_layers) * layer_token;
  p.kv_bytes_per_token_sliding = U(shape.sliding_layers) * layer_token;
  p.kv_bytes_per_context_token = p.kv_bytes / U(std::max<int64_t>(1, o.concurrency * o.context));
  if (shape.sliding_layers > 0) {
    p.notes.push_back(fmt::format(
        "{} of {} layers use a {}-token sliding window; kvserve frees their KV blocks as they leave it: KV {} "
        "({} bytes a token at context {}) instead of {} with every layer at every position",
        shape.sliding_layers, shape.layers, shape.sliding_window, Gib(p.kv_bytes),
        WithCommas(p.kv_bytes_per_context_token), o.context, Gib(p.kv_bytes_without_windows)));
  }
  p.activations = Activations(shape, StepTokens(o), o.max_batch_size, o.context, o.threads);
  p.activation_bytes = p.activations.Total();
  p.overhead_bytes = RuntimeOverheadBytes(o.threads);
  p.total_bytes = p.weights_bytes + p.kv_bytes + p.activation_bytes + p.overhead_bytes;
  p.total_with_margin_bytes = static_cast<uint64_t>(static_cast<double>(p.total_bytes) * (1.0 + o.margin));
  const uint64_t split = p.weights_bytes + p.kv_bytes;
  const uint64_t replicated = p.activation_bytes + p.overhead_bytes;
  p.per_device_bytes = PerDeviceBytes(split, replicated, o.devices);
  p.budget_per_device_bytes = static_cast<uint64_t>(static_cast<double>(o.device.bytes) * o.memory_fraction);
  p.fits = FitsBudget(p.per_device_bytes, o);

  // Devices: per-device bytes only fall as devices are added.
  auto fits_on = [&](int64_t n) { return FitsBudget(PerDeviceBytes(split, replicated, n), o); };
  if (!fits_on(kMaxDevices)) {
    p.devices_needed = -1;
  } else {
    int64_t lo = 0, hi = kMaxDevices;  // !fits_on(lo) (lo = 0 stands for none), fits_on(hi)
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits_on(mid) ? hi : lo) = mid;
    }
    p.devices_needed = hi;
  }

  // Inversions keep max_batch_size following concurrency when it was unset.
  PlanOptions at_context = options;
  at_context.context = o.context;
  p.max_concurrency_at_context = LargestFitting(
      int64_t{1} << 20,
      [&](int64_t c) {
        PlanOptions x = at_context;
        x.concurrency = c;
        return Fits(shape, x);
      },
      &p.max_concurrency_capped);
  p.max_context_at_concurrency = LargestFitting(
      shape.max_context,
      [&](int64_t ctx) {
        PlanOptions x = options;
        x.context = ctx;
        return Fits(shape, x);
      },
      &p.max_context_capped);

  // Notes on the inputs.
  if (o.context > shape.max_context) {
    p.notes.push_back(fmt::format("context {} exceeds the model's max context {}", o.context, shape.max_context));
  }
  if (o.weights_format && shape.file_weights_bytes > 0) {
    p.notes.push_back(fmt::format("weights computed from the shapes in {}, not the file's {} bytes",
                                  WeightFormatName(*o.weights_format), WithCommas(shape.file_weights_bytes)));
  }
  if (p.weights_dtype == "q4_k_m") p.notes.push_back("q4_k_m is planned at an average of 4.85 bits per weight");
  if (o.devices > 1 && shape.kv_heads % o.devices != 0) {
    p.notes.push_back(fmt::format("{} devices do not divide the {} KV heads evenly; tensor parallelism usually needs that",
                                  o.devices, shape.kv_heads));
  }
  if (p.fits) return p;

  // Suggestions: each change alone, measured against the same rule.
  auto fits_with = [&](auto&& change) {
    PlanOptions x = options;
    change(x);
    return Fits(shape, x);
  };
  auto verdict = [](bool f) { return f ? "; with it the plan fits" : "; alone it does not fit"; };
  bool weights_alone = false, kv_alone = false;
  std::optional<WeightFormat> smallest_weights;
  for (WeightFormat w : {WeightFormat::kQ8_0, WeightFormat::kQ4_K_M}) {
    const uint64_t bytes = WeightBytesFromShape(shape, w);
    if (bytes >= p.weights_bytes) continue;
    const bool f = fits_with([&](PlanOptions& x) { x.weights_format = w; });
    weights_alone |= f;
    smallest_weights = w;
    p.suggestions.push_back(fmt::format("quantizing weights to {} saves {} (weights {} -> {}; --weights-dtype {}){}",
                                        WeightFormatName(w), Gib(p.weights_bytes - bytes), Gib(p.weights_bytes),
                                        Gib(bytes), WeightFormatName(w), verdict(f)));
  }
  if (KvBytesPerToken(shape, DType::kQ8_0) < p.kv_bytes_per_token) {
    PlanOptions q = o;
    q.kv_dtype = DType::kQ8_0;
    const uint64_t kv_q8 = KvBytes(shape, q);
    kv_alone = fits_with([](PlanOptions& x) { x.kv_dtype = DType::kQ8_0; });
    p.suggestions.push_back(fmt::format("KV q8_0 saves {} (KV {} -> {}; --kv-dtype q8_0){}", Gib(p.kv_bytes - kv_q8),
                                        Gib(p.kv_bytes), Gib(kv_q8), verdict(kv_alone)));
  }
  // 4-bit KV only when 8-bit is not enough: it costs accuracy (docs/benchmarks.md, "KV dtypes").
  if (!kv_alone && KvBytesPerToken(shape, DType::kQ4_0) < p.kv_bytes_per_token) {
    PlanOptions q = o;
    q.kv_dtype = DType::kQ4_0;
    const uint64_t kv_q4 = KvBytes(shape, q);
    kv_alone = fits_with([](PlanOptions& x) { x.kv_dtype = DType::kQ4_0; });
    p.suggestions.push_back(fmt::format("KV q4_0 saves {} (KV {} -> {}; --kv-dtype q4_0, less accurate than q8_0){}",
                                        Gib(p.kv_bytes - kv_q4), Gib(p.kv_bytes), Gib(kv_q4), verdict(kv_alone)));
  }
  if (smallest_weights && KvBytesPerToken(shape, DType::kQ8_0) < p.kv_bytes_per_token && !weights_alone &&
      !kv_alone) {
    const bool both = fits_with([&](PlanOptions& x) {
      x.weights_format = smallest_weights;
      x.kv_dtype = DType::kQ8_0;
    });
    p.suggestions.push_back(fmt::format("{} weights together with q8_0 KV {}", WeightFormatName(*smallest_weights),
                                        both ? "fit" : "still do not fit"));
  }
  if (p.max_concurrency_at_context > 0) {
    p.suggestions.push_back(fmt::format("concurrency {} fits at context {} (--concurrency {})",
                                        p.max_concurrency_at_context, o.context, p.max_concurrency_at_context));
  } else {
    p.suggestions.push_back(fmt::format("not even one sequence of {} tokens fits on {} device(s)", o.context, o.devices));
  }
  if (p.max_context_at_concurrency > 0) {
    p.suggestions.push_back(fmt::format("context {} fits at concurrency {} (--context {})",
                                        p.max_context_at_concurrency, o.concurrency, p.max_context_at_concurrency));
  }
  if (p.devices_needed > 0) {
    std::string s = fmt::format("use {} devices (--devices {}; weights and KV split tensor-parallel)",
                                p.devices_needed, p.devices_needed);
    if (shape.kv_heads % p.devices_needed != 0) {
      int64_t d = p.devices_needed;
      while (d <= shape.kv_heads && shape.kv_heads % d != 0) ++d;
      if (d <= shape.kv_heads) {
        s += fmt::format("; tensor parallelism usually needs a count that divides the {} KV heads: {}",
                         shape.kv_heads, d);
      }
    }
    p.suggestions.push_back(s);
  } else {
    p.suggestions.push_back(
        fmt::format("activations and overhead alone ({}) do not fit one device with the margin: lower "
                    "--max-num-batched-tokens or --max-batch-size",
                    Gib(p.activation_bytes + p.overhead_bytes)));
  }
  return p;
}

nlohmann::json PlanToJson(const MemoryPlan& p) {
  const ModelShape& s = p.shape;
  const PlanOptions& o = p.options;
  nlohmann::json model = {
      {"name", s.name},         {"arch", s.arch},         {"source", s.source},
      {"layers", s.layers},     {"hidden", s.hidden},     {"heads", s.heads},
      {"kv_heads", s.kv_heads}, {"head_dim", s.head_dim}, {"ffn", s.ffn},
      {"vocab", s.vocab},       {"tied_embeddings", s.tied_embeddings},
      {"max_context", s.max_context}, {"params", s.params},
      {"active_params", s.active_params},
  };
  if (s.experts > 0) {
    model["experts"] = s.experts;
    model["experts_used"] = s.experts_used;
    model["expert_ffn"] = s.expert_ffn;
    model["shared_expert_ffn"] = s.shared_expert_ffn;
  }
  nlohmann::json inputs = {
      {"context", o.context},
      {"concurrency", o.concurrency},
      {"weights_dtype", p.weights_dtype},
      {"kv_dtype", KvName(o.kv_dtype)},
      {"block_size", o.block_size},
      {"max_num_batched_tokens", o.max_num_batched_tokens},
      {"max_batch_size", o.max_batch_size},
      {"threads", o.threads},
      {"device", o.device.name},
      {"device_bytes", o.device.bytes},
      {"devices", o.devices},
      {"memory_fraction", o.memory_fraction},
      {"margin", o.margin},
  };
  nlohmann::json act = {
      {"hidden_states", p.activations.hidden_states}, {"residual", p.activations.residual},
      {"qkv", p.activations.qkv},                     {"attention_out", p.activations.attention_out},
      {"attention_scratch", p.activations.attention_scratch}, {"mlp", p.activations.mlp},
      {"logits", p.activations.logits},
  };
  nlohmann::json j = {
      {"model", model},
      {"inputs", inputs},
      {"weights_bytes", p.weights_bytes},
      {"kv_bytes_per_token", p.kv_bytes_per_token},
      {"kv_bytes_per_block", p.kv_bytes_per_block},
      {"kv_blocks_per_sequence", p.kv_blocks_per_sequence},
      {"kv_bytes", p.kv_bytes},
      {"kv_bytes_windowed", p.kv_bytes_windowed},
      {"kv_bytes_without_windows", p.kv_bytes_without_windows},
      {"kv_bytes_per_token_global_layers", p.kv_bytes_per_token_global},
      {"kv_bytes_per_token_sliding_layers", p.kv_bytes_per_token_sliding},
      {"kv_bytes_per_context_token", p.kv_bytes_per_context_token},
      {"sliding_window", p.shape.sliding_window},
      {"sliding_layers", p.shape.sliding_layers},
      {"activation_bytes", p.activation_bytes},
      {"activations", act},
      {"overhead_bytes", p.overhead_bytes},
      {"total_bytes", p.total_bytes},
      {"total_with_margin_bytes", p.total_with_margin_bytes},
      {"per_device_bytes", p.per_device_bytes},
      {"budget_per_device_bytes", p.budget_per_device_bytes},
      {"fits", p.fits},
      {"devices_needed", p.devices_needed},
      {"max_concurrency_at_context", p.max_concurrency_at_context},
      {"max_concurrency_capped", p.max_concurrency_capped},
      {"max_context_at_concurrency", p.max_context_at_concurrency},
      {"max_context_capped", p.max_context_capped},
      {"suggestions", p.suggestions},
      {"notes", p.notes},
  };
  // The inputs also at the top level, for scripts.
  for (auto it = inputs.begin(); it != inputs.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::string PlanToText(const MemoryPlan& p) {
  const ModelShape& s = p.shape;
  const PlanOptions& o = p.options;
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };
  line(fmt::format("model        {} ({}, {})", s.name, s.arch, s.source));
  line(fmt::format("             {} layers, hidden {}, {} heads / {} KV heads x {}, FFN {}, vocab {}{}", s.layers,
                   s.hidden, s.heads, s.kv_heads, s.head_dim, s.ffn, s.vocab,
                   s.tied_embeddings ? ", tied embeddings" : ""));
  if (s.experts > 0) {
    line(fmt::format("             {} of {} experts of FFN {} per token{}", s.experts_used, s.experts, s.expert_ffn,
                     s.shared_expert_ffn > 0 ? fmt::format(" + a shared expert of FFN {}", s.shared_expert_ffn) : ""));
    line(fmt::format("             {} parameters (all resident), {} active per token, max context {}",
                     Count(s.params), Count(s.active_params), s.max_context));
  } else {
    line(fmt::format("             {} parameters, max context {}", Count(s.params), s.max_context));
  }
  line(fmt::format("serving      context {} x concurrency {}; weights {}, KV {} in blocks of {}", o.context,
                   o.concurrency, p.weights_dtype, KvName(o.kv_dtype), o.block_size));
  line(fmt::format("             step of {} batched tokens, batch {}, {} threads", o.max_num_batched_tokens,
                   o.max_batch_size, o.threads));
  line(fmt::format("device       {}: {} ({}) x {}, memory fraction {:.2f} -> budget {} per device", o.device.name,
                   FormatGB(o.device.bytes), FormatGiB(o.device.bytes), o.devices, o.memory_fraction,
                   FormatGiB(p.budget_per_device_bytes)));
  line("");
  line(fmt::format("weights      {:>12}  {} bytes", Gib(p.weights_bytes), WithCommas(p.weights_bytes)));
  if (s.sliding_layers > 0) {
    line(fmt::format("KV cache     {:>12}  global {} layers: {} bytes/token x {} blocks of {} tokens; sliding {} layers: "
                     "{} bytes/token x {} blocks (window {}); x {} seq",
                     Gib(p.kv_bytes), s.layers - s.sliding_layers, WithCommas(p.kv_bytes_per_token_global),
                     p.kv_blocks_per_sequence, o.block_size, s.sliding_layers,
                     WithCommas(p.kv_bytes_per_token_sliding),
                     std::min(p.kv_blocks_per_sequence, KvBlocksForTokens(s.sliding_window + o.block_size - 1, o.block_size)),
                     s.sliding_window, o.concurrency));
    line(fmt::format("             {} bytes/token at context {} ({} with every layer at every position: {})",
                     WithCommas(p.kv_bytes_per_context_token), o.context, WithCommas(p.kv_bytes_per_token),
                     Gib(p.kv_bytes_without_windows)));
  } else {
    line(fmt::format("KV cache     {:>12}  {} bytes/token x {} blocks of {} tokens x {} seq", Gib(p.kv_bytes),
                     WithCommas(p.kv_bytes_per_token), p.kv_blocks_per_sequence, o.block_size, o.concurrency));
  }
  line(fmt::format("activations  {:>12}  peak of one step (MLP {}, logits {}, attention scratch {})",
                   Gib(p.activation_bytes), Gib(p.activations.mlp), Gib(p.activations.logits),
                   Gib(p.activations.attention_scratch)));
  line(fmt::format("overhead     {:>12}  512 MiB fixed + {} threads x 8 MiB stack", Gib(p.overhead_bytes), o.threads));
  line(fmt::format("total        {:>12}  with {:.0f}% headroom {}", Gib(p.total_bytes), o.margin * 100,
                   Gib(p.total_with_margin_bytes)));
  if (o.devices > 1) {
    line(fmt::format("per device   {:>12}  weights and KV split over {} devices", Gib(p.per_device_bytes), o.devices));
  }
  line("");
  line(fmt::format("fits         {} ({} x {:.2f} = {} needed per device, budget {})", p.fits ? "yes" : "NO",
                   Gib(p.per_device_bytes), 1.0 + o.margin,
                   Gib(static_cast<uint64_t>(static_cast<double>(p.per_device_bytes) * (1.0 + o.margin))),
                   Gib(p.budget_per_device_bytes)));
  line(fmt::format("devices      {}", p.devices_needed > 0
                                          ? fmt::format("{} needed with {:.0f}% margin", p.devices_needed, o.margin * 100)
                                          : std::string("none suffices (activations and overhead alone too large)")));
  line(fmt::format("max concurrency at context {}: {}{}", o.context, p.max_concurrency_at_context,
                   p.max_concurrency_capped ? " (search cap)" : ""));
  line(fmt::format("max context at concurrency {}: {}{}", o.concurrency, p.max_context_at_concurrency,
                   p.max_context_capped ? " (the model's max context)" : ""));
  for (const std::string& n : p.notes) line("note: " + n);
  if (!p.suggestions.empty()) {
    line("");
    line("suggestions:");
    for (const std::string& sug : p.suggestions) line("  - " + sug);
  }
  return out;
}

}  // namespace kvs::plan
