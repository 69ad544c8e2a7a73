// `kvserve needle --url URL`: needle-in-a-haystack recall of an
// OpenAI-compatible endpoint over context lengths x depths, with the
// effective context length (src/bench/needle_run.h).
#include <cstdio>
#include <filesystem>

#include "bench/needle_run.h"
#include "cli/command.h"

namespace kvs::cli {
namespace {

struct NeedleArgs {
  bench::NeedleCommandOptions o;
  std::string variant = "single";
  std::string api = "completions";
  std::string keys;
  int64_t expect_length = 0;
};

int RunNeedle(NeedleArgs a) {
  bench::NeedleCommandOptions& o = a.o;
  auto v = bench::ParseNeedleVariant(a.variant);
  if (!v.ok()) {
    std::fprintf(stderr, "kvserve needle: %s\n", v.status().message().c_str());
    return 2;
  }
  o.spec.variant = *v;
  if (a.api == "chat") {
    o.spec.api = bench::ApiKind::kChat;
  } else if (a.api != "completions") {
    std::fprintf(stderr, "kvserve needle: --api must be completions or chat\n");
    return 2;
  }
  if (!a.keys.empty()) {
    std::string cur;
    for (char c : a.keys + ",") {
      if (c == ',') {
        if (!cur.empty()) o.spec.keys.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  if (a.expect_length > 0) o.expect_length = a.expect_length;
  // -m: a GGUF file is a local tokenizer, anything else the served model id.
  if (!o.model.empty() && std::filesystem::is_regular_file(o.model)) {
    if (o.tokenizer.empty()) o.tokenizer = o.model;
    o.model.clear();
  }
  return bench::RunNeedleCommand(o);
}

const Registrar kRegister_needle({"needle", "Needle-in-a-haystack recall of an endpoint over context lengths x depths",
               [](CLI::App* app) {
                 auto a = std::make_shared<NeedleArgs>();
                 bench::NeedleCommandOptions& o = a->o;
                 o.spec.seed = 0;  // random unless given
                 app->add_option("--url", o.url, "OpenAI-compatible endpoint, http://host:port[/v1]")->required();
                 app->add_option("--api-key", o.api_key, "Bearer key")->envname("KVSERVE_API_KEY");
                 app->add_option("-m,--model", o.model, "Served model id, or a GGUF file for token counts");
                 app->add_option("--tokenizer", o.tokenizer, "GGUF file for token counts (default: /tokenize)");
                 app->add_option("--lengths", o.lengths_text,
                                 "Context lengths: FROM:TO doubling ('max' = the context) or a list (default: "
                                 "1024 doubling up to the context)");
                 app->add_option("--depths", o.depths_text, "Depths: FROM:TO:STEP in % or a list (default 0:100:10)");
                 app->add_option("--trials", o.spec.trials, "Cases per cell, each with fresh needles")
                     ->check(CLI::Range(1, 10000));
                 app->add_option("--variant", a->variant,
                                 "single, multikey, multivalue, multiquery, vt (variable tracking), cwe (common "
                                 "words) or fwe (frequent words), as RULER");
                 app->add_option("--tasks", o.tasks,
                                 "Run several variants as a suite and score them together: ruler (all), or a list "
                                 "such as single,multikey,vt,cwe");
                 app->add_option("--value-kind", o.spec.value_kind, "Needle values: digits, uuid or words");
                 app->add_option("--hops", o.spec.hops, "vt: assignments after the first in the chain");
                 app->add_option("--common-words", o.spec.common_words, "cwe: the common words to name");
                 app->add_option("--needles", o.spec.needles, "multikey: needles in all (one is asked)");
                 app->add_option("--values", o.spec.values, "multivalue: values of the one key");
                 app->add_option("--queries", o.spec.queries, "multiquery: keys asked at once");
                 app->add_option("--distractors", o.spec.distractors, "Extra needles with other keys, never asked");
                 app->add_option("--needle", o.spec.tmpl.fact, "Needle template with {value} (and {key})");
                 app->add_option("--question", o.spec.tmpl.question, "Question template ({key})");
                 app->add_option("--answer-prefix", o.spec.tmpl.answer_prefix,
                                 "Completions mode: the prompt ends with this ({key})");
                 app->add_option("--keys", a->keys, "Comma-separated key pool (default: given names)");
                 app->add_option("--digits", o.spec.value_digits, "Digits of each value")->check(CLI::Range(1, 18));
                 app->add_option("--haystack", o.spec.haystack,
                                 "filler, prose, needles (all distractors: needle-form sentences with other keys) "
                                 "or a text file");
                 app->add_option("--api", a->api, "completions (prompt ends with the answer prefix) or chat");
                 app->add_option("--max-tokens", o.spec.max_tokens, "Answer tokens (default: enough for the values)");
                 app->add_option("--threshold", o.spec.threshold, "Recall for the effective length (default 0.9)")
                     ->check(CLI::Range(0.0, 1.0));
                 app->add_option("--expect-length", a->expect_length,
                                 "PASS/FAIL (exit 1) whether the effective length reaches this");
                 app->add_option("--seed", o.spec.seed, "Seed for needles and haystacks (default: random)");
                 app->add_option("--parallel", o.run.parallel, "Requests in flight")->check(CLI::Range(1, 64));
                 app->add_option("--request-timeout", o.run.request_timeout_seconds, "Seconds per request");
                 app->add_option("--json", o.json_path, "Write the grid and every case as JSON");
                 app->add_option("--html", o.html_path, "Write a self-contained HTML report with the heatmap");
                 app->add_option("--svg", o.svg_path, "Also write the heatmap as an SVG file");
                 app->add_flag("--no-progress", [a](int64_t) { a->o.run.progress = false; }, "No progress line");
                 return [a] { return RunNeedle(*a); };
               }});

}  // namespace
}  // namespace kvs::cli
