// `kvserve plan`: memory accounts and capacity planning for a model on a
// device (see src/plan/plan.h for the formulas, docs/capacity-planning.md for
// a worked example). Exit 0 with a plan (fitting or not), 2 on bad input.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "cli/command.h"
#include "plan/parallel.h"
#include "plan/plan.h"

namespace kvs::cli {
namespace {

struct PlanArgs {
  std::string model, hf_config, preset;
  std::string context, concurrency = "1";  // context "": the model's max
  std::string weights_dtype, kv_dtype = "f16";
  std::string block_size = "16", max_num_batched_tokens = "2048", max_batch_size, threads = "32";
  std::string device = "h100-80g", devices = "1", memory_fraction = "1.0";
  std::string tensor_parallel, pipeline_parallel;  // "": no per-rank plan
  bool json = false;
  bool list = false;
};

// A whole decimal integer in [min, 2^40].
StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& text, int64_t min) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return InvalidArgument("{} expects an integer, got \"{}\"", flag, text);
  }
  if (v < min) {
    return InvalidArgument("{} must be at least {}, got {}", flag, min, v);
  }
  if (v > (int64_t{1} << 40)) return InvalidArgument("{} {} is implausibly large", flag, v);
  return v;
}

StatusOr<double> ParseFraction(const std::string& flag, const std::string& text) {
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return InvalidArgument("{} expects a number, got \"{}\"", flag, text);
  }
  if (!(v > 0 && v <= 1)) return InvalidArgument("{} must be in (0, 1], got {}", flag, text);
  return v;
}

StatusOr<plan::ModelShape> LoadShape(const PlanArgs& a) {
  const int given = !a.model.empty() + !a.hf_config.empty() + !a.preset.empty();
  if (given != 1) {
    return InvalidArgument("give exactly one of --model FILE.gguf, --hf-config config.json, --preset NAME");
  }
  if (!a.preset.empty()) return plan::FindPreset(a.preset);
  const std::string& path = a.model.empty() ? a.hf_config : a.model;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return NotFound("{}: no such file", path);
  if (!a.model.empty()) return plan::ShapeFromGguf(path);
  return plan::ShapeFromHfConfig(path);
}

StatusOr<plan::PlanOptions> BuildOptions(const PlanArgs& a) {
  plan::PlanOptions o;
  if (!a.context.empty()) {
    KVS_ASSIGN_OR_RETURN(o.context, ParseInt("--context", a.context, 1));
  }
  KVS_ASSIGN_OR_RETURN(o.concurrency, ParseInt("--concurrency", a.concurrency, 1));
  if (!a.weights_dtype.empty()) {
    KVS_ASSIGN_OR_RETURN(plan::WeightFormat w, plan::ParseWeightFormat(a.weights_dtype));
    o.weights_format = w;
  }
  KVS_ASSIGN_OR_RETURN(o.kv_dtype, plan::ParseKvDType(a.kv_dtype));
  KVS_ASSIGN_OR_RETURN(o.block_size, ParseInt("--block-size", a.block_size, 1));
  KVS_ASSIGN_OR_RETURN(o.max_num_batched_tokens, ParseInt("--max-num-batched-tokens", a.max_num_batched_tokens, 1));
  if (!a.max_batch_size.empty()) {
    KVS_ASSIGN_OR_RETURN(o.max_batch_size, ParseInt("--max-batch-size", a.max_batch_size, 1));
  }
  KVS_ASSIGN_OR_RETURN(o.threads, ParseInt("--threads", a.threads, 1));
  KVS_ASSIGN_OR_RETURN(o.device, plan::ResolveDevice(a.device));
  KVS_ASSIGN_OR_RETURN(o.devices, ParseInt("--devices", a.devices, 1));
  KVS_ASSIGN_OR_RETURN(o.memory_fraction, ParseFraction("--memory-fraction", a.memory_fraction));
  KVS_RETURN_IF_ERROR(plan::ValidateOptions(o));
  return o;
}

StatusOr<plan::ParallelLayout> ParseLayout(const PlanArgs& a, const plan::ModelShape& shape) {
  plan::ParallelLayout l;
  if (!a.tensor_parallel.empty()) {
    KVS_ASSIGN_OR_RETURN(l.tensor, ParseInt("--tensor-parallel", a.tensor_parallel, 1));
  }
  if (!a.pipeline_parallel.empty()) {
    KVS_ASSIGN_OR_RETURN(l.pipeline, ParseInt("--pipeline-parallel", a.pipeline_parallel, 1));
  }
  if (a.devices != "1") {
    return InvalidArgument("give --devices or --tensor-parallel / --pipeline-parallel, not both");
  }
  KVS_RETURN_IF_ERROR(plan::ValidateLayout(shape, l));
  return l;
}

void PrintLists() {
  std::printf("model presets:\n");
  for (const std::string& n : plan::PresetNames()) {
    const plan::ModelShape s = plan::FindPreset(n).value();
    std::printf("  %-16s %6.2fB params, %3lld layers, %2lld KV heads x %lld, max context %lld\n", n.c_str(),
                static_cast<double>(s.params) / 1e9, static_cast<long long>(s.layers),
                static_cast<long long>(s.kv_heads), static_cast<long long>(s.head_dim),
                static_cast<long long>(s.max_context));
  }
  std::printf("devices (decimal GB as on the datasheets):\n");
  for (const plan::DevicePreset& d : plan::DevicePresets()) {
    std::printf("  %-10s %s  %s\n", d.name, plan::FormatGB(d.bytes).c_str(), d.description);
  }
  std::printf("  cpu        this machine's memory (MemTotal or the cgroup limit)\n");
  std::printf("  cpu:SIZE   a given amount, e.g. cpu:64GiB\n");
}

int RunPlan(const PlanArgs& a) {
  if (a.list) {
    PrintLists();
    return 0;
  }
  StatusOr<plan::ModelShape> shape = LoadShape(a);
  if (!shape.ok()) {
    std::fprintf(stderr, "kvserve plan: %s\n", shape.status().message().c_str());
    return 2;
  }
  StatusOr<plan::PlanOptions> options = BuildOptions(a);
  if (!options.ok()) {
    std::fprintf(stderr, "kvserve plan: %s\n", options.status().message().c_str());
    return 2;
  }
  // A per-rank plan when a parallel layout is given: each rank is a device.
  std::optional<plan::ParallelLayout> layout;
  if (!a.tensor_parallel.empty() || !a.pipeline_parallel.empty()) {
    StatusOr<plan::ParallelLayout> l = ParseLayout(a, *shape);
    if (!l.ok()) {
      std::fprintf(stderr, "kvserve plan: %s\n", l.status().message().c_str());
      return 2;
    }
    layout = *l;
    options->devices = layout->ranks();
  }
  const plan::MemoryPlan p = plan::ComputePlan(*shape, *options);
  std::optional<plan::ParallelPlan> pp;
  if (layout) pp = plan::ComputeParallelPlan(*shape, *options, *layout);
  if (a.json) {
    nlohmann::json j = plan::PlanToJson(p);
    if (pp) j["parallel"] = plan::ParallelPlanToJson(*pp);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::fputs(plan::PlanToText(p).c_str(), stdout);
    if (pp) std::fputs(("\n" + plan::ParallelPlanToText(*pp)).c_str(), stdout);
  }
  return 0;
}

const Registrar kRegister_plan(Command{
    "plan", "Memory accounts and capacity planning: does a model fit, and how to make it fit",
    [](CLI::App* sub) -> std::function<int()> {
      auto a = std::make_shared<PlanArgs>();
      sub->add_option("--model", a->model, "GGUF model file (weights from its real tensor sizes)");
      sub->add_option("--hf-config", a->hf_config, "Hugging Face config.json (weights computed from the shapes)");
      sub->add_option("--preset", a->preset, "built-in model shape (see --list)");
      sub->add_option("--context", a->context, "tokens per sequence (default: the model's max context)");
      sub->add_option("--concurrency", a->concurrency, "sequences resident at once (default 1)");
      sub->add_option("--weights-dtype", a->weights_dtype,
                      "f32, f16, bf16, q8_0, q6_k, q4_k_m, q4_0 (default: the source's)");
      sub->add_option("--kv-dtype", a->kv_dtype, "f32, f16, bf16, q8_0, q4_0, q4_1 (default f16)");
      sub->add_option("--block-size", a->block_size, "tokens per KV block (default 16)");
      sub->add_option("--max-num-batched-tokens", a->max_num_batched_tokens,
                      "tokens computed in one step (default 2048)");
      sub->add_option("--max-batch-size", a->max_batch_size, "sequences in one step (default: concurrency)");
      sub->add_option("--threads", a->threads, "compute threads (default 32)");
      sub->add_option("--device", a->device, "h200, h100-80g, a100-80g, a100-40g, l40s, a10, rtx4090, cpu, "
                                             "cpu:SIZE or a size such as 80GB / 24GiB (default h100-80g)");
      sub->add_option("--devices", a->devices, "devices the model is split over, tensor-parallel (default 1)");
      sub->add_option("--tensor-parallel", a->tensor_parallel,
                      "ranks each layer is split over (heads, FFN columns); adds a per-rank plan");
      sub->add_option("--pipeline-parallel", a->pipeline_parallel,
                      "stages, each a contiguous range of layers; adds a per-rank plan");
      sub->add_option("--memory-fraction", a->memory_fraction, "part of each device kvserve may use (default 1.0)");
      sub->add_flag("--json", a->json, "print one JSON object");
      sub->add_flag("--list", a->list, "list the model presets and devices");
      return [a] { return RunPlan(*a); };
    }});

}  // namespace
}  // namespace kvs::cli
