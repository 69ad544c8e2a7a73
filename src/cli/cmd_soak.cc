// `kvserve soak --url URL`: a long run of mixed traffic (ordinary requests,
// checked answers, bad inputs, clients that hang up) against any endpoint,
// reporting crashes, error classes, RSS and KV over time (bench/soak.h).
#include <memory>

#include "bench/soak.h"
#include "cli/command.h"

namespace kvs::cli {
namespace {

const Registrar kRegister_soak(
    {"soak", "Soak an endpoint with mixed traffic and bad inputs; check it stays up, correct and within memory",
     [](CLI::App* app) -> std::function<int()> {
       auto o = std::make_shared<bench::SoakOptions>();
       app->add_option("--url", o->url, "OpenAI-compatible endpoint, http://host:port[/v1]")->required();
       app->add_option("--api-key", o->api_key, "Bearer key")->envname("KVSERVE_API_KEY");
       app->add_option("-m,--model", o->model, "Served model id (default: the endpoint's first)");
       app->add_option("--tokenizer", o->tokenizer, "GGUF file for token counts when the endpoint has no /tokenize");
       app->add_option("--replica-metrics", o->replica_metrics,
                       "The /metrics of each replica behind a gateway (http://HOST:PORT, repeatable)");
       app->add_option("--duration", o->duration_seconds, "Seconds of traffic")->check(CLI::PositiveNumber);
       app->add_option("--window", o->window_seconds, "Seconds per reporting window (default: duration / 10, 5-60)");
       app->add_option("-c,--concurrency", o->concurrency, "Requests in flight")->check(CLI::Range(1, 4096));
       app->add_option("--api", o->api, "completions or chat");
       app->add_option("--mix", o->mix, "Input lengths LENGTH:WEIGHT,... (lengths over the context are left out)");
       app->add_option("--output-len", o->output_len, "Generated tokens per ordinary request")
           ->check(CLI::Range(1, 1 << 20));
       app->add_option("--probes", o->probes,
                       "KIND:SHARE,... of recall, json, arithmetic, over-length, malformed, cancel ('' for none)");
       app->add_option("--answers-min", o->answers_min, "Check: share of right answers per probe kind")
           ->check(CLI::Range(0.0, 1.0));
       app->add_option("--kv-watermark-max", o->kv_watermark_max, "Check: peak KV use")->check(CLI::Range(0.0, 1.0));
       app->add_option("--rss-growth-max", o->rss_growth_max,
                       "Check: RSS growth from minute 5 (or 20 % of the run) to the end")
           ->check(CLI::PositiveNumber);
       app->add_option("--memory-ratio-max", o->memory_ratio_max,
                       "Check: each server's resident memory at most this multiple of its memory plan")
           ->check(CLI::PositiveNumber);
       app->add_option("--kv-idle-seconds", o->kv_idle_seconds, "Check: seconds for KV use to fall to 0 once idle");
       app->add_option("--request-timeout", o->request_timeout, "Seconds per request");
       app->add_option("--seed", o->seed, "Seed for prompts and probes (default: random, printed)");
       app->add_option("--json", o->json_path, "Write the windows, RSS series, classes and checks as JSON");
       app->add_flag("--no-progress", [o](int64_t) { o->progress = false; }, "No line per window");
       return [o] { return bench::RunSoak(*o); };
     }});

}  // namespace
}  // namespace kvs::cli
