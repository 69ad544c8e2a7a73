// Prefix-cache warm start: after a restart the prefix cache is empty, so the
// first requests that share a long common prefix (a system prompt, few-shot
// examples, a document) pay its full prefill. WarmPrefixCache reads
// kv_cache.warm_prompts_file and runs each prompt through the engine (one
// output token) before the server reports ready; the prompt's full KV
// blocks stay in the prefix cache (evictable, like any cached prefix).
//
// File format, one prompt per line (empty lines and lines starting with '#'
// are skipped): plain text (tokenized as a completions prompt, BOS added),
// or a JSON object {"prompt": "text"} or {"messages": [...]} (rendered with
// the model's chat template without the generation prompt, as a chat
// request's prefix).
// Thread-safety: call once, on the loader thread, before the service is ready.
#pragma once

#include <string>

#include "base/status.h"
#include "server/backend.h"

namespace kvs::server {

struct WarmResult {
  int prompts = 0;
  int64_t tokens = 0;  // prompt tokens prefilled
  double seconds = 0;
};

// InvalidArgument naming the line for a bad line; an unreadable file is
// NotFound. A prompt longer than the context is refused with its line.
StatusOr<WarmResult> WarmPrefixCache(InferenceBackend& backend, const std::string& path);

}  // namespace kvs::server
