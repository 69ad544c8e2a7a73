// `kvserve random-model`: writes a random-weight model of a given shape and
// weight type (benchmarks and tests need models no hub can provide here).
#include <cstdio>

#include "cli/command.h"
#include "model/random_model.h"

namespace kvs::cli {
namespace {

const Registrar kRegister_random_model({"random-model", "Write a random-weight GGUF model (benchmark shapes)", [](CLI::App* app) {
                 struct Opts {
                   std::string preset = "test-125m", type = "F32", out, arch = "llama";
                   uint32_t seed = 1;
                   int experts = 0, experts_used = 2, expert_ffn = 0, layers = 0;
                 };
                 auto o = std::make_shared<Opts>();
                 app->add_option("--preset", o->preset, "Shape: test-125m (12 layers, hidden 768, 12/4 heads, ffn 2048, vocab 32000)");
                 app->add_option("--type", o->type, "Weight type: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q4_K_M");
                 app->add_option("--arch", o->arch, "llama, qwen2, qwen3, qwen3moe or qwen2moe");
                 app->add_option("--experts", o->experts, "Mixture of experts: experts per layer (qwen*moe need > 0)");
                 app->add_option("--experts-used", o->experts_used, "Experts each token runs (default 2)");
                 app->add_option("--expert-ffn", o->expert_ffn, "Each expert's FFN width (default: llama.cpp's)");
                 app->add_option("--layers", o->layers, "Layers (default: the preset's)")->check(CLI::Range(1, 1024));
                 app->add_option("--seed", o->seed, "Random seed");
                 app->add_option("-o,--out", o->out, "Output GGUF path")->required();
                 return [o]() -> int {
                   if (o->preset != "test-125m") {
                     std::fprintf(stderr, "error: unknown --preset '%s' (known: test-125m)\n", o->preset.c_str());
                     return 2;
                   }
                   model::RandomModelSpec s = model::Test125MSpec();
                   s.arch = o->arch;
                   s.seed = o->seed;
                   s.n_experts = o->experts;
                   s.n_experts_used = o->experts_used;
                   s.expert_ffn = o->expert_ffn;
                   if (o->layers > 0) s.n_layers = o->layers;
                   if (o->experts < 0 || (o->experts > 0 && (o->experts_used < 1 || o->experts_used > o->experts))) {
                     std::fprintf(stderr, "error: --experts-used must be in [1, --experts]\n");
                     return 2;
                   }
                   if (o->type == "Q4_K_M" || o->type == "q4_k_m") {
                     s.mix = "Q4_K_M";
                     s.weight_type = DType::kQ4_K;
                   } else if (auto t = DTypeFromName(o->type); t && Traits(*t).supported) {
                     s.weight_type = *t;
                   } else {
                     std::fprintf(stderr, "error: unsupported --type '%s'\n", o->type.c_str());
                     return 2;
                   }
                   Status st = model::WriteRandomModel(s, o->out, "");
                   if (!st.ok()) {
                     std::fprintf(stderr, "error: %s\n", st.ToString().c_str());
                     return 1;
                   }
                   std::fprintf(stderr, "wrote %s\n", o->out.c_str());
                   return 0;
                 };
               }});

}  // namespace
}  // namespace kvs::cli
