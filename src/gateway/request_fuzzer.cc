// libFuzzer target: the gateway's request path from the body to admission,
// as ProxyRequest::Prepare runs it: parse (api::ParseJsonObject), count the
// prompt with the bundled model's tokenizer and chat template
// (PromptCounter::Count: chat rendered with content as plain text), the
// tenant's cache salt and the block hashes cache-aware routing computes,
// then admission against a tenant's limits and the release of its lease;
// and the context policies (context_policy.h): the body cleaned, then cut to
// a budget below its count by each truncation policy.
//
// Input: one byte choosing the endpoint ('c' chat, 'r' /v1/responses, 'm'
// /v1/messages, anything else completions), then the body. Must hold for every input: no crash, no
// sanitizer report; an error is a 4xx with a message; a counted request has
// prompts whose token ids are inside the vocabulary, and counts that add up;
// a fitted prompt is within its budget, and its dropped tokens add up.
//
// The model is models/kvserve-tiny.gguf of the source tree
// (KVSERVE_SOURCE_DIR at build time, or $KVSERVE_SOURCE_DIR); without it
// every input is skipped (the target still builds and runs).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "api/openai_request.h"
#include "gateway/cache_salt.h"
#include "gateway/context_policy.h"
#include "gateway/limits.h"
#include "gateway/prompt_counter.h"
#include "gateway/routing.h"
#include "kvcache/block_hash.h"

#ifndef KVSERVE_SOURCE_DIR
#define KVSERVE_SOURCE_DIR "."
#endif

namespace {

using namespace kvs::gateway;

const PromptCounter* Counter() {
  static const std::unique_ptr<PromptCounter> counter = [] {
    const char* env = std::getenv("KVSERVE_SOURCE_DIR");
    const std::filesystem::path model = std::filesystem::path(env ? env : KVSERVE_SOURCE_DIR) / "models/kvserve-tiny.gguf";
    auto c = PromptCounter::Load(model.string());
    if (!c.ok()) {
      std::fprintf(stderr, "request_fuzzer: %s: every input is skipped\n", c.status().message().c_str());
      return std::unique_ptr<PromptCounter>();
    }
    return std::move(*c);
  }();
  return counter.get();
}

void Fail(const char* what) {
  std::fprintf(stderr, "gateway request_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const PromptCounter* counter = Counter();
  if (!counter || size < 1) return 0;
  // The dialects of /v1/responses and /v1/messages are chat requests underneath.
  const kvs::api::Dialect dialect = data[0] == 'r'   ? kvs::api::Dialect::kResponses
                                    : data[0] == 'm' ? kvs::api::Dialect::kAnthropic
                                                     : kvs::api::Dialect::kOpenAI;
  const kvs::api::Endpoint endpoint = data[0] == 'c' || dialect != kvs::api::Dialect::kOpenAI
                                          ? kvs::api::Endpoint::kChatCompletions
                                          : kvs::api::Endpoint::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);

  kvs::api::Json json;
  if (auto e = kvs::api::ParseJsonObject(body, &json)) {
    if (e->status < 400 || e->status >= 500 || e->message.empty()) Fail("a parse error that is not a 4xx with a message");
    return 0;
  }
  CountedRequest counted;
  if (auto e = counter->Count(endpoint, json, &counted, dialect)) {
    if (e->status < 400 || e->status >= 500 || e->message.empty()) Fail("a count error that is not a 4xx with a message");
    return 0;
  }
  int64_t total = 0, longest = 0;
  for (const auto& p : counted.prompts) {
    for (int32_t id : p) {
      if (id < 0 || id >= counter->vocab_size()) Fail("a token id outside the vocabulary");
    }
    total += static_cast<int64_t>(p.size());
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  if (total != counted.total_prompt_tokens || longest != counted.max_prompt_tokens) Fail("the counts do not add up");

  // The namespace and block hashes cache-aware routing computes.
  const std::string salt = TenantCacheSalt("tenant", counted.req.cache_salt);
  if (salt.size() != 66) Fail("a tenant salt of the wrong length");
  if (!counted.prompts.empty()) {
    const auto hashes = kvs::kvcache::ChainBlockHashes(kvs::kvcache::PrefixCacheNamespace("", salt), counted.prompts.front(), 16);
    if (hashes.size() > counted.prompts.front().size() / 16 + 1) Fail("more block hashes than blocks");
  }

  // Admission and release of the reservation.
  static LocalRateLimiter limiter;
  AdmitRequest ar;
  ar.tenant = "tenant";
  ar.limits.tokens_per_minute = 1 << 20;
  ar.limits.max_concurrent = 4;
  ar.tokens = counted.total_prompt_tokens + static_cast<int64_t>(counted.prompts.size()) * counted.req.n *
                                                 counted.req.max_tokens.value_or(16);
  ar.lease_id = "fuzz";
  AdmitResult r = limiter.Admit(ar);
  if (r.admitted) limiter.Release(r.lease, counted.total_prompt_tokens);

  // Context policies: cleaning never fails; a fit to a budget below the
  // count either errs with a 4xx or leaves a prompt within the budget.
  kvs::api::Json cleaned = json;
  CleanRequestBody(endpoint, dialect, &cleaned);
  const int64_t budget = counted.max_prompt_tokens * 2 / 3;
  if (budget >= 1 && counted.max_prompt_tokens < 4096) {
    for (OverflowPolicy policy : {OverflowPolicy::kTruncateOldestTurns, OverflowPolicy::kTruncateMiddle}) {
      kvs::api::Json body = json;
      CountedRequest c = counted;
      Fitted fitted;
      if (auto e = FitPrompt(*counter, endpoint, dialect, policy, budget, &body, &c, &fitted)) {
        if (e->status < 400 || e->status >= 500 || e->message.empty()) Fail("a fit error that is not a 4xx with a message");
        continue;
      }
      if (c.max_prompt_tokens > budget) Fail("a fitted prompt over its budget");
      if (fitted.dropped_tokens != counted.max_prompt_tokens - c.max_prompt_tokens) Fail("dropped tokens do not add up");
    }
  }
  return 0;
}
