// Request datasets for `kvserve bench --dataset FILE`: real prompts and
// answer lengths, or a timed trace, instead of generated text.
//
// Accepted files (a JSON array, or JSON Lines: one object per line):
//  - ShareGPT conversations, as vLLM's and SGLang's benchmarks read them:
//    {"conversations": [{"from": "human", "value": "..."},
//                       {"from": "gpt", "value": "..."}, ...]}
//    ("user"/"assistant" and "role"/"content" also accepted);
//  - OpenAI chat: {"messages": [{"role": "user", "content": "..."}, ...]};
//  - a trace: {"timestamp": SECONDS, "input_length": N, "output_length": M}
//    (Mooncake / Azure LLM inference trace fields; "input_tokens",
//    "output_tokens" and "prompt" are also read).
// A conversation gives its first user message as the prompt and the reply
// that follows as the answer whose token count is the request's max_tokens
// (as vLLM's benchmark does). Entries without a user message are skipped;
// a file with none usable is an error naming it.
// Thread-safety: a Dataset is immutable once loaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace kvs::bench {

struct DatasetEntry {
  std::string prompt;                    // "" for a trace entry (text generated to input_length)
  std::string reply;                     // the recorded answer ("" when none)
  std::optional<double> timestamp;       // seconds (trace)
  std::optional<int64_t> input_length;   // tokens (trace)
  std::optional<int64_t> output_length;  // tokens (trace)
};

struct Dataset {
  std::string path;
  std::vector<DatasetEntry> entries;
  int64_t skipped = 0;         // objects without a usable prompt or length
  bool timed = false;          // every entry has a timestamp: replay them
};

StatusOr<Dataset> LoadDataset(const std::string& path);
StatusOr<Dataset> ParseDataset(const std::string& text, const std::string& name);

}  // namespace kvs::bench
