// ProxyRequest: one generation request through the gateway, from its
// preparation to its audit line.
//
//   Prepare (prep thread): parse + validate, count prompt tokens, choose the
//     candidate pools by length, check the model, admit against the limits,
//     build the upstream body (max_tokens set to the pool's default when a
//     chat request has none, so the reservation bounds what it can use;
//     stream_options.include_usage forced on, so the real usage comes back;
//     the usage is not passed on to a client that did not ask for it).
//   Attempts (exchange strand): the routing policy picks a replica among the
//     candidate pools' available ones not yet tried; the request goes out on
//     the pooled HTTP client. An attempt that fails before any byte reached
//     the client (connect error or timeout, no first token in time, 5xx or
//     429, the replica died) is retried on another replica, up to the pool's
//     max_retries. A stream's leading events that carry no token (the chat
//     role delta) are held back until its first token, so a replica dying in
//     prefill is still retried; once the client has bytes, a failure becomes
//     an in-band SSE error event followed by [DONE].
//   The client going away cancels the upstream call (the replica sees its
//     connection close, cancels the generation and frees its KV).
//   Finish (once): corrects the tenant's token charge with the real usage,
//     frees the concurrency slot and the replica's outstanding tokens,
//     counts metrics, writes the audit line.
// Thread-safety: after Prepare, everything runs on the exchange's strand;
// upstream callbacks are posted there.
#pragma once

#include <memory>

#include "api/openai_request.h"
#include "gateway/gateway.h"
#include "http/http_server.h"

namespace kvs::gateway {

// Starts handling a generation request whose key was accepted.
void StartProxy(Gateway* gw, std::shared_ptr<http::Exchange> ex, api::Endpoint endpoint, Principal principal,
                std::string request_id);

// Sends an OpenAI-style error (and counts / audits it as a request that
// reached no replica).
void ReplyGatewayError(Gateway* gw, const std::shared_ptr<http::Exchange>& ex, const api::ApiError& e,
                       const std::string& request_id, const Principal* principal);

}  // namespace kvs::gateway
