// What the gateway does with a prompt that is too long for every pool, and
// with invisible characters in prompts (a pool's on_overflow and
// clean_content): the deployment guide's remedy for over-long inputs,
// applied where requests enter, before they cost a replica anything.
//
//   reject                 400 context_length_exceeded (the default).
//   truncate_oldest_turns  chat-like requests (Chat Completions, Messages,
//                          Responses with an input list): the system /
//                          developer messages stay; the oldest other turns
//                          are dropped, the fewest that make the prompt
//                          fit, and the conversation then starts at a user
//                          turn (templates that require alternation, and
//                          tool results that need their call, stay valid).
//                          The last turn is never dropped.
//   truncate_middle        the longest text of the request (a Completions
//                          prompt, a Responses input string, or the longest
//                          message content) loses tokens from its middle:
//                          its head and tail stay. Cuts fall on token
//                          boundaries of the model's own tokenizer, moved to
//                          whole UTF-8 characters; content is tokenized as
//                          text, so a control token is never cut (it cannot
//                          occur in content).
//
// Cleaning removes, from every text a client wrote (message contents, text
// parts, string prompts): C0 controls but tab, line feed and carriage
// return, DEL, C1 controls, zero-width and word-joiner characters, bidi
// embedding / override / isolate controls, soft hyphen and the byte-order
// mark. Malformed UTF-8 is left as it is (the parsers refuse it where it
// matters).
//
// Every change is reported to the caller (Fitted), which marks the response
// (header, usage field) and counts it: a truncation is never silent.
// Thread-safety: pure functions over the caller's values; the counter is
// immutable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/error.h"
#include "api/openai_request.h"
#include "gateway/prompt_counter.h"

namespace kvs::gateway {

enum class OverflowPolicy { kReject, kTruncateOldestTurns, kTruncateMiddle };

inline constexpr std::string_view kOverflowReject = "reject";
inline constexpr std::string_view kOverflowTruncateOldestTurns = "truncate_oldest_turns";
inline constexpr std::string_view kOverflowTruncateMiddle = "truncate_middle";

// kReject for an unknown name (the configuration allows only these three).
OverflowPolicy ParseOverflowPolicy(std::string_view name);
std::string_view OverflowPolicyName(OverflowPolicy p);

// Removes the characters listed above from s; returns how many.
int64_t CleanText(std::string* s);

// Cleans every client-written text of a request body (in its dialect);
// returns the characters removed.
int64_t CleanRequestBody(api::Endpoint endpoint, api::Dialect dialect, api::Json* body);

// What a fit did.
struct Fitted {
  int64_t prompt_tokens_before = 0;
  int64_t dropped_tokens = 0;  // prompt tokens before - after
  int64_t dropped_messages = 0;  // truncate_oldest_turns: turns (messages, input items) dropped
};

// Rewrites *body so that its prompt (counted as the replica will count it)
// is at most `budget` tokens, by `policy` (not kReject), and recounts it
// into *counted. An error when the policy cannot make it fit (the message
// says what remained and why), when the request has nothing the policy can
// cut (e.g. truncate_oldest_turns on a Completions prompt), or for a
// multi-prompt Completions request.
std::optional<api::ApiError> FitPrompt(const PromptCounter& counter, api::Endpoint endpoint, api::Dialect dialect,
                                       OverflowPolicy policy, int64_t budget, api::Json* body, CountedRequest* counted,
                                       Fitted* fitted);

}  // namespace kvs::gateway
