// The gateway's proxy of the public API (proxy_request.h holds the whole
// story of one request): StartProxy hands a request whose key was accepted
// to the prep pool; ReplyGatewayError answers one the gateway refuses before
// that.
// Thread-safety: both are called on the exchange's strand.
#pragma once

#include <memory>
#include <string>

#include "api/error.h"
#include "api/routes.h"
#include "gateway/keys.h"
#include "gateway/proxy_host.h"
#include "http/http_server.h"

namespace kvs::gateway {

// Starts handling a request of an API route the gateway proxies (generation
// in any dialect, /tokenize, /detokenize) whose key was accepted.
void StartProxy(ProxyHost* gw, std::shared_ptr<http::Exchange> ex, const api::ApiRoute& route, Principal principal,
                std::string request_id);

// Sends an error in the shape of the request path's dialect (Anthropic's on
// /v1/messages, else OpenAI's) and counts / audits it as a request that
// reached no replica. route: the route matched (nullptr: none), for the
// endpoint label.
void ReplyGatewayError(ProxyHost* gw, const std::shared_ptr<http::Exchange>& ex, const api::ApiError& e,
                       const std::string& request_id, const Principal* principal, const api::Route* route);

}  // namespace kvs::gateway
