// What the proxy needs to know about the OpenAI stream events it relays
// from a replica to the client. Pure functions; no state.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvs::gateway {

// Does a stream event carry a token (or the end: a finish_reason or the
// usage)? The chat role delta and empty deltas do not: the proxy holds those
// back until the first token, so an attempt that dies in prefill can still be
// retried on another replica. Anything it does not recognise counts as a
// token (passed on at once).
bool CarriesToken(const nlohmann::json& event);

// With stream_options.include_usage forced on upstream, every chunk carries
// "usage":null; a client that did not ask for usage gets its chunks without
// the member. Inside JSON strings quotes are escaped, so this exact text only
// appears as the member itself.
void StripNullUsage(std::string* data);

}  // namespace kvs::gateway
