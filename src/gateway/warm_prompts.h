// The prompts the gateway replays to a joining replica (warmup.h): loading
// a pool's warm_prompts_file (also when the configuration is checked) and
// the body of one replay.
//
// File format (the one `kvserve serve` reads for kv_cache.warm_prompts_file,
// server/warm.h): one prompt per line; empty lines and lines starting with
// '#' are skipped; a line is plain text (sent as a completions prompt) or a
// JSON object {"prompt": "text"} (completions) or {"messages": [...]} (a chat
// request: the replica renders it with its chat template, so a later
// conversation starting with these messages shares its full blocks).
// Under gateway.prefix_cache_scope "tenant" each tenant has its own cache
// namespace, so a prompt warms one tenant's: the object's "tenant" member
// names it; plain lines and objects without one warm kAnonymousTenant's
// (the tenant of every request to a gateway without a key file).
//
// Thread-safety: LoadWarmPrompts is pure apart from reading the file;
// WarmRequestBody is pure.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace kvs::gateway {

struct WarmPrompt {
  int line = 0;        // in the file, for logs
  bool chat = false;   // /v1/chat/completions, else /v1/completions
  // The request body's members after "model" (serialized once at load):
  // `"prompt":"...","max_tokens":1,...}` -- the body is `{"model":M,` + this.
  std::string rest;
};

// NotFound when the file cannot be read; InvalidArgument naming the file and
// line for a bad line, and for a file without prompts.
// tenant_scope: gateway.prefix_cache_scope is "tenant" (each replay carries
// its tenant's cache_salt).
StatusOr<std::vector<WarmPrompt>> LoadWarmPrompts(const std::string& path, bool tenant_scope = false);

// The body of one replay to a replica serving `model`.
std::string WarmRequestBody(const WarmPrompt& p, const std::string& model);

}  // namespace kvs::gateway
