// Workloads of the online benchmark (`kvserve bench --url`).
//
// A WorkloadSpec is one set of settings, from flags or one entry of a YAML
// workload file; list-valued settings (concurrencies, rates, input lengths)
// are sweeps, and ExpandRuns turns a spec into one RunPlan per combination.
// A RunPlan lists every request it will send (lengths, arrival offsets,
// conversation and turn) before anything is sent, so that prompt building
// and tokenization never run inside the timed part.
//
// Arrival processes:
//  - fixed concurrency (closed loop): C requests in flight, a new one as soon
//    as one finishes;
//  - Poisson (open loop): exponential gaps at a rate, optionally capped at a
//    maximum concurrency; with burstiness B the gaps are gamma distributed
//    with shape B and the same mean (B < 1 burstier, B > 1 more regular, as
//    vLLM's --burstiness); with a ramp-up of S seconds the rate rises
//    linearly from 0 to its value over the first S seconds;
//  - a trace (a dataset whose entries have timestamps): replayed at its
//    own times;
// Length shapes: a fixed input length (optionally drawn from a normal
// distribution with a standard deviation, output lengths too), one run per
// input length of a sweep, a mix of lengths drawn per request, shared-prefix
// multi-turn conversations whose history grows turn by turn, or the prompts
// and answer lengths of a dataset (bench/dataset.h).
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/dataset.h"
#include "bench/probes.h"

namespace kvs::bench {

enum class ApiKind { kCompletions, kChat };
const char* ApiKindName(ApiKind a);  // "completions", "chat"

struct MultiTurnSpec {
  int conversations = 0;       // 0: off
  int turns = 0;
  int64_t system_tokens = 0;   // a system prompt shared by every conversation
};

struct WorkloadSpec {
  std::string name;  // a label for the runs (default from the settings)
  ApiKind api = ApiKind::kCompletions;
  // Sweeps. Neither concurrency nor rates given: concurrency 1.
  std::vector<int> concurrency;        // closed loop
  std::vector<double> rates;           // requests/s, Poisson open loop
  int max_concurrency = 0;             // cap for Poisson runs (0: none)
  int64_t num_requests = 0;            // per run (0: default; a rate run with a duration: the arrivals in it)
  double duration_seconds = 0;         // per run: stop sending after this (0: none)
  std::vector<int64_t> input_lengths;  // one run each (empty: input_len)
  // The lengths as written when they refer to the context ("512:max", max =
  // the context minus output_len): ResolveLengths fills input_lengths.
  std::string input_lengths_text;
  int64_t input_len = 512;
  int64_t output_len = 128;
  std::vector<std::pair<int64_t, double>> mix;  // (input length, weight); non-empty: drawn per request
  MultiTurnSpec multi_turn;
  int64_t input_stddev = 0, output_stddev = 0;  // > 0: lengths drawn from normal(len, stddev), at least 1
  double burstiness = 1;                // gamma shape of Poisson gaps (1: exponential)
  double ramp_up_seconds = 0;           // rate runs: linear ramp of the rate from 0
  std::string dataset;                  // a dataset or trace file (bench/dataset.h); "" = generated prompts
  bool ignore_eos = true;               // so every answer has output_len tokens
  std::string text = "prose";           // "prose", "filler" or a file
  uint64_t seed = 1;
  // Requests whose answers are checked (bench/probes.h): a share of the
  // requests each (recall in multi-turn runs: of the conversations, which
  // carry no other kind).
  ProbeShares probes;

  std::string Describe() const;
  nlohmann::json ToJson() const;
};

// Checks ranges and combinations (names the setting at fault).
Status ValidateSpec(const WorkloadSpec& spec);

// Turns input_lengths_text into input_lengths; "max" needs the context.
Status ResolveLengths(WorkloadSpec* spec, std::optional<int64_t> context);

// "256:0.8,4096:0.2" (weights need not sum to 1; "4k" means 4096).
StatusOr<std::vector<std::pair<int64_t, double>>> ParseMix(const std::string& s);
// "4:3" or "4:3:512": conversations, turns, shared system prompt tokens.
StatusOr<MultiTurnSpec> ParseMultiTurn(const std::string& s);
// "512:4096" doubling (512, 1024, 2048, 4096), or a list "512,1000,3000".
// "max" stands for `max` when it is > 0 (an error otherwise).
StatusOr<std::vector<int64_t>> ParseLengths(const std::string& s, int64_t max = 0);

// A YAML workload file: top-level keys are defaults; an optional `runs:`
// list gives one spec each, overriding the defaults. Keys are the long flag
// names (dashes or underscores): api, concurrency, rate, max-concurrency,
// num-requests, duration, input-len, input-lengths, output-len, mix,
// multi-turn, ignore-eos, text, seed, name, probes, input-stddev,
// output-stddev, burstiness, ramp-up, dataset; plus slo (a list of SLO
// strings) at the top level. An unknown key is an error that names it.
struct WorkloadFile {
  std::vector<WorkloadSpec> specs;
  std::vector<std::string> slos;
};
StatusOr<WorkloadFile> LoadWorkloadFile(const std::string& path, const WorkloadSpec& defaults);
StatusOr<WorkloadFile> ParseWorkloadYaml(const std::string& yaml, const WorkloadSpec& defaults);

struct PlannedRequest {
  int64_t index = 0;          // within the run
  int64_t input_tokens = 0;   // target prompt length (user turn for multi-turn)
  int64_t output_tokens = 0;
  double arrival = 0;         // seconds from the run's start (Poisson; 0 for closed loop)
  int conversation = -1;      // multi-turn: conversation and turn (0-based)
  int turn = -1;
  ProbeKind probe = ProbeKind::kNone;  // recall: on the conversation's last turn
  int64_t dataset_index = -1;          // the dataset entry it sends (-1: generated text)
};

struct RunPlan {
  std::string name;       // "c=4 in=512", "rate=2 in=1024", ...
  ApiKind api = ApiKind::kCompletions;
  int concurrency = 0;    // closed loop when > 0
  double rate = 0;        // Poisson when > 0
  int max_concurrency = 0;
  double burstiness = 1, ramp_up_seconds = 0;
  bool trace = false;     // arrivals are a dataset's timestamps
  std::shared_ptr<const Dataset> dataset;
  double duration_seconds = 0;
  int64_t input_len = 0;  // the sweep's input length (0 for mixes)
  int64_t output_len = 0;
  bool ignore_eos = true;
  MultiTurnSpec multi_turn;
  std::string text;
  uint64_t seed = 1;
  ProbeShares probes;
  std::vector<PlannedRequest> requests;  // in sending order (multi-turn: by turn within each conversation)
  // Requests are sent at their planned arrival times (rate or trace), not
  // as earlier ones end.
  bool OpenLoop() const { return rate > 0 || trace; }
  nlohmann::json ToJson() const;         // settings, without the request list
};

// One run per (input length) x (concurrency or rate) combination.
StatusOr<std::vector<RunPlan>> ExpandRuns(const WorkloadSpec& spec);

}  // namespace kvs::bench
