// The OpenAI-style error answers the gateway's proxy gives a client itself
// (the replicas' own errors pass through unchanged). Pure functions of the
// request's figures: each names the limit that was hit, the figures that hit
// it and what to change, and sets Retry-After where a retry can succeed.
// Thread-safety: none needed (no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/error.h"
#include "gateway/keys.h"
#include "gateway/limits.h"

namespace kvs::gateway {

// No pool's context holds prompt + wanted tokens (400
// context_length_exceeded). `prompt_param` names the prompt's field
// ("prompt", "messages", "input"); `max_tokens_param` the client's budget
// field ("max_tokens", "max_completion_tokens", "max_output_tokens"), empty
// when it sent none.
api::ApiError ContextTooLong(const std::string& prompt_param, const std::string& max_tokens_param, int64_t prompt,
                             int64_t wanted, int64_t largest_context);

// The model is not among those the candidate pools' replicas serve (404).
api::ApiError ModelNotFound(const std::string& model, const std::vector<std::string>& served);

// A refused admission: 429 naming the limit (Retry-After unless the request
// can never fit), or 503 when the rate-limit store is unreachable.
api::ApiError RateLimited(const AdmitResult& r, const TenantLimits& limits, const std::string& tenant,
                          double global_requests_per_second, int64_t reserved_tokens);

// Every replica of `pool` is busy and its fair queue is full (503).
api::ApiError QueueFull(const std::string& pool, int64_t max_queued);
// The request waited `seconds` in the pool's fair queue without a turn (503).
api::ApiError QueueTimeout(const std::string& pool, double seconds);
// No replica of any candidate pool is available (503).
api::ApiError NoReplica();
// Every attempt failed: 504 when the last failure (or the deadline) was a
// timeout, else 502.
api::ApiError UpstreamFailed(bool timeout, int attempts, const std::string& last_error);
// A failure after the client got bytes: sent as an in-band SSE error event.
api::ApiError UpstreamFailedMidStream(const std::string& message);
// The request-preparation queue is full (503).
api::ApiError GatewayOverloaded();

}  // namespace kvs::gateway
