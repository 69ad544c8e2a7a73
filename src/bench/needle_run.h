// Running the needle test against an endpoint: `kvserve needle` from start
// to end, and the serve start-up gate built on it.
//
// RunNeedleGrid builds each cell's cases (exact token counts through the
// counter) and sends them with `parallel` requests in flight, at
// temperature 0, not streamed; a failed request counts as a miss and keeps
// its error.
//
// The gate (`kvserve serve --needle-gate LENGTH:THRESHOLD`) is a small grid
// at one length (depths 0, 25, 50, 75, 100 %, two trials each): it passes
// when the recall over all its cases reaches the threshold.
// Thread-safety: each function is called from one thread and runs its own
// workers, joined before it returns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/endpoint.h"
#include "bench/needle.h"

namespace kvs::bench {

struct NeedleRunOptions {
  int parallel = 2;
  bool progress = true;
  double request_timeout_seconds = 600;
};

std::vector<NeedleResult> RunNeedleGrid(Endpoint& endpoint, TokenCounter& counter, const NeedleSpec& spec,
                                        const TextSource& haystack, const NeedleRunOptions& options);

// Default lengths: doubling from 1024 up to the context (the last one is
// the context minus the answer's tokens, so prompt + answer fit).
std::vector<int64_t> DefaultNeedleLengths(int64_t context, int64_t max_answer_tokens);

// `kvserve needle` options and entry point (returns the exit code: 0 done,
// 1 when --expect-length is not reached, 2 for bad options or endpoint).
struct NeedleCommandOptions {
  std::string url, api_key, model, tokenizer;
  std::string lengths_text;  // "1k:max" etc.; "" = default doubling to the context
  std::string depths_text = "0:100:10";
  NeedleSpec spec;
  std::string tasks;         // a suite: "ruler" or "single,vt,cwe" (then spec.variant is not used)
  NeedleRunOptions run;
  std::optional<int64_t> expect_length;
  std::string json_path, html_path;
  std::string svg_path;  // also write the heatmap as a standalone SVG
};
int RunNeedleCommand(const NeedleCommandOptions& options);

struct NeedleGateSpec {
  int64_t length = 0;
  double threshold = 0.9;
  int trials = 2;
  std::string ToString() const;  // "4096:90%"
};
// "4096:0.9", "4k:90%", "4096:0.9:3" (trials).
StatusOr<NeedleGateSpec> ParseNeedleGate(const std::string& s);

struct NeedleGateResult {
  bool passed = false;
  double recall = 0;
  int64_t length = 0;  // as tested (capped to the context)
  std::string detail;  // "recall 9/10 = 90 % at 4064 tokens >= 90 %"
};
// Runs the gate against base_url (the server itself, over loopback).
// Errors are for a gate that could not run at all (no /tokenize, ...).
StatusOr<NeedleGateResult> RunNeedleGate(const std::string& base_url, const std::string& api_key,
                                         const NeedleGateSpec& gate);

}  // namespace kvs::bench
