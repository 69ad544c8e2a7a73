// Reasoning ("thinking") sections in model output: the syntax a model
// thinks in (recognised from its chat template, or named by the
// model.reasoning_parser configuration key), where a reply starts relative
// to its section (the generation prompt may have opened it already, or
// closed an empty one to turn thinking off), a stream parser that splits a
// reply into reasoning and content, and the grammar wrapper that leaves the
// reasoning free when the content is constrained.
//
// Formats (name: the section's delimiters; models):
//   think     <think> ... </think>       DeepSeek-R1 and its distills, Qwen3, QwQ, GLM-4.5/4.6,
//                                         Kimi-K2-Thinking, DeepSeek V3.1+, StepFun, MiniCPM, Nemotron
//   seed_oss  <seed:think> ... </seed:think>
//   minimax   <mm:think> ... </mm:think>
//   mistral   [THINK] ... [/THINK]        (Magistral, Ministral reasoning)
//   command   <|START_THINKING|> ... <|END_THINKING|>
//   gemma4    <|channel>thought ... <channel|>
//   harmony   <|channel|>analysis<|message|> ... <|end|>   (gpt-oss: the analysis messages that open the
//             reply; what follows, <|start|>assistant<|channel|>final<|message|>..., is content for the
//             harmony tool-call parser, which removes the headers)
//
// A reply's reasoning is the text of its leading section: the section
// counts only where the reply begins with it (after whitespace), or where
// the prompt already opened it (ReasoningStart::kInside); a start tag later
// in the content is content. A section that never closes (max_tokens
// reached while thinking) is all reasoning and the content is empty.
// Whitespace around the reasoning, and between the end tag and the content,
// is dropped (templates put "\n" after <think> and "\n\n" after </think>).
//
// Thread-safety: functions are pure; a ReasoningStreamParser is one
// sequence's state, used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace kvs::grammar {

struct ReasoningFormat {
  std::string name;   // "" when the model has no reasoning section
  std::string start;  // "<think>"
  std::string end;    // "</think>"
  bool harmony = false;
  bool enabled() const { return !name.empty(); }
};

// The format whose tags the chat template writes (disabled when none).
ReasoningFormat DetectReasoningFormat(std::string_view chat_template);
// A format by name: one of ReasoningFormatNames(), or an alias of vLLM's
// --reasoning-parser (deepseek_r1, qwen3, glm45, kimi_k2, ... -> think;
// gpt_oss -> harmony); "none" gives the disabled format. NotFound for
// anything else.
StatusOr<ReasoningFormat> ReasoningFormatByName(std::string_view name);
const std::vector<std::string>& ReasoningFormatNames();
// The format's delimiters as they may appear as single tokens (keep them
// when detokenizing; allow them as grammar text).
std::vector<std::string> ReasoningMarkers(const ReasoningFormat& format);
// The tokens of `tokenizer` that are one of `markers` and that a decoder
// dropping special tokens drops, with their text. Sorted by id.
std::vector<std::pair<int32_t, std::string>> DroppedMarkerTokens(const tok::Tokenizer& tokenizer,
                                                                 const std::vector<std::string>& markers);

// Where a reply begins, from the prompt that precedes it.
enum class ReasoningStart {
  kContent,  // the prompt closed the section (thinking off): all content
  kMaybe,    // the reply may open a section itself
  kInside,   // the prompt opened the section: the reply starts as reasoning
};
ReasoningStart ReasoningStartOf(const ReasoningFormat& format, std::string_view prompt);
const char* ReasoningStartName(ReasoningStart start);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

// Splits a reply, fed in pieces cut anywhere (inside a tag, inside a UTF-8
// character), into reasoning and content. Text that may still turn out to
// be (part of) a tag, or whitespace that may be trimmed, is held back.
class ReasoningStreamParser {
 public:
  ReasoningStreamParser(ReasoningFormat format, ReasoningStart start);

  ReasoningDelta Feed(std::string_view text);
  // The reply ended: releases what was held back.
  ReasoningDelta Finish();
  // Inside the section now (the last text fed belongs to the reasoning).
  bool in_reasoning() const { return state_ == State::kInside; }
  // A section was opened (by the prompt or the reply).
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State { kMaybe, kInside, kAfterEnd, kContent };
  void Process(bool final);
  // kMaybe / harmony's kAfterEnd: whether buf_ (after whitespace) starts
  // with one of `starts`: 1 yes (consumed), 0 no, -1 undecided.
  int MatchStart(const std::vector<std::string>& starts, bool final);
  void EmitReasoning(std::string_view text);

  ReasoningFormat format_;
  State state_;
  std::string buf_;
  ReasoningDelta out_;
  bool section_has_text_ = false;  // the current section released reasoning (leading whitespace is over)
  bool need_separator_ = false;    // harmony: a further analysis message; "\n" before its text
  bool released_reasoning_ = false;
  bool saw_reasoning_ = false;
};

// Whole-reply parsing: the stream parser fed everything at once.
ReasoningDelta ParseReasoning(const ReasoningFormat& format, ReasoningStart start, std::string_view text);

// The grammar of a reply that starts with its reasoning section (free text
// up to the end tag; optional when start is kMaybe) followed by content
// matching `g`: the constraint applies after the reasoning. For harmony,
// `tool_call` says g writes its own message header (ToolCallGrammar);
// otherwise the final-channel header comes before g. With a disabled
// format or start kContent, g itself.
StatusOr<Grammar> WithReasoningSection(const Grammar& g, const ReasoningFormat& format, ReasoningStart start,
                                       bool tool_call);

}  // namespace kvs::grammar
