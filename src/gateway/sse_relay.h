// What the proxy needs to know about the answers it relays from a replica to
// the client, in each API dialect (api::Dialect): which stream events carry
// a token, where the usage is, and how the gateway's own in-band error looks.
//
// OpenAI (chat and completions) streams are unnamed `data:` events ending in
// [DONE]; Responses and Anthropic streams are named events (`event:` lines)
// without [DONE]. Each dialect's replica opens its stream with events that
// carry no token (the chat role delta; Anthropic's message_start, ping,
// content_block_start; Responses' response.created, response.in_progress and
// the *.added events): the proxy holds those back until the first token, so
// an attempt that dies in prefill can still be retried on another replica.
// Anything not recognised as token-less counts as a token (passed on at
// once: a retry must never repeat what the client has seen).
// Pure functions; no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/error.h"
#include "api/openai_request.h"

namespace kvs::gateway {

// Does an OpenAI stream event carry a token (or the end: a finish_reason or
// the usage)? The chat role delta and empty deltas do not.
bool CarriesToken(const nlohmann::json& event);

// With stream_options.include_usage forced on upstream, every chunk carries
// "usage":null; a client that did not ask for usage gets its chunks without
// the member. Inside JSON strings quotes are escaped, so this exact text only
// appears as the member itself.
void StripNullUsage(std::string* data);

// A named event of a Responses or Anthropic stream: does it carry a token
// (or the end, or an error)?
bool DialectEventCarriesToken(api::Dialect d, std::string_view event);
// Is it a delta (about one token: what a stream cut before its usage is
// charged per event)?
bool DialectEventIsDelta(api::Dialect d, std::string_view event);

// The usage a replica reported, in the gateway's terms.
struct UsageReport {
  int64_t prompt = -1;  // prompt tokens, the cached ones included; -1: not reported
  int64_t completion = 0;
  std::optional<int64_t> cached;  // of the prompt, served from the prefix cache
};

// Reads a dialect's `usage` object: OpenAI's prompt_tokens, completion_tokens,
// prompt_tokens_details.cached_tokens; Responses' input_tokens,
// output_tokens, input_tokens_details.cached_tokens; Anthropic's
// input_tokens (the uncached part only) + cache_read_input_tokens +
// cache_creation_input_tokens, output_tokens, cache_read_input_tokens
// (prompt -1 when input_tokens is absent: a message_delta may leave it to
// message_start). Not an object: prompt -1.
UsageReport ReadUsage(api::Dialect d, const nlohmann::json& usage);

// The usage object a named stream event reports, or nullptr: Anthropic's
// message_start (message.usage: the prompt, nothing generated yet) and
// message_delta (usage: the final figures); Responses' response.completed,
// response.incomplete and response.failed (response.usage).
const nlohmann::json* EventUsage(api::Dialect d, std::string_view event, const nlohmann::json& data);
// The same usage object, to edit (the gateway adds truncated_prompt_tokens).
nlohmann::json* EventUsage(api::Dialect d, std::string_view event, nlohmann::json& data);
// Whether EventUsage can find one in this event (the proxy parses only these).
bool EventMayReportUsage(api::Dialect d, std::string_view event);

// The in-band error the gateway writes once a stream has started, in the
// shape the dialect's replicas write theirs (api::DialectShape::StreamError):
// OpenAI `event: error` with {"error": {...}} then [DONE]; Anthropic
// `event: error` with {"type": "error", "error": {...}}; Responses
// `event: error` with {"type": "error", "code", "message", "param",
// "sequence_number"}, whose number continues the relayed events'
// (`next_sequence_number`).
std::string StreamErrorEvents(api::Dialect d, const api::ApiError& e, int64_t next_sequence_number);

}  // namespace kvs::gateway
