// Tool calls in model output: which syntax a model uses (recognised from its
// chat template), parsing the output into content + tool calls (whole text,
// or incrementally while streaming, as OpenAI streams delta.tool_calls), and
// the grammar that forces a call (tool_choice "required" or a named
// function) in the model's own syntax with arguments valid against the
// function's JSON schema.
//
// Formats (examples of one call to get_weather({"city": "Oslo"})):
//   kHermes      <tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>
//                (Hermes 2 Pro, Qwen2.5, Qwen3, QwQ)
//   kQwen3Coder  <tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>
//   kLlama3      {"name": "get_weather", "parameters": {"city": "Oslo"}}   (optionally after <|python_tag|>;
//                built-in tools as <|python_tag|>brave_search.call(query="x"))
//   kMistral     [TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}   ([CALL_ID]id before [ARGS] allowed;
//                the older [TOOL_CALLS][{"name": .., "arguments": .., "id": ..}] list too)
//   kDeepSeekV3  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{..}\n```
//                <｜tool▁call▁end｜><｜tool▁calls▁end｜>  (V3, R1 distills)
//   kDeepSeekV31 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{..}<｜tool▁call▁end｜>...
//   kFunctionary <function=get_weather>{"city": "Oslo"}</function>   (v3.1; <|python_tag|>code calls "python")
//   kHarmony     <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{..}<|call|>
//                (gpt-oss; analysis-channel text is returned as reasoning)
// Formats described by tool_call_syntax.h (strings written raw where the
// template does; other values JSON unless said):
//   kGlm45       <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>
//                (GLM-4.5/4.6, poolside Laguna; Laguna-S without the newlines)
//   kHy3         <tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n
//                <arg_key:opensource>city</arg_key:opensource>\n<arg_value:opensource>Oslo</arg_value:opensource>
//                \n</tool_call:opensource>\n</tool_calls:opensource>   (Tencent Hy3)
//   kKimiK2      <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>
//                {..}<|tool_call_end|><|tool_calls_section_end|>   (Kimi K2, K2-Thinking)
//   kSolarOpen   <|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>get_weather<|tool_call:args|>{..}
//                <|tool_call:end|><|calls|>   (Upstage Solar Open; <|think|>..<|end|> is reasoning)
//   kDeepSeekV32 <｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city"
//                string="true">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>
//   kDeepSeekV4  the same with <｜DSML｜tool_calls>
//   kAtem        <|start|>assistant to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">
//                \n<atem:parameter name="city">Oslo</atem:parameter>\n</atem:invoke>\n</atem:function_calls><|eom|>
//                (Muse Glimmer; a message to=self is reasoning, to=user the answer)
//   kMiniCpm5    <function name="get_weather"><param name="city">Oslo</param></function>   (MiniCPM5; CDATA
//                strings, Python literals)
//   kSeedOss     <seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>\n
//                </seed:tool_call>   (ByteDance Seed-OSS)
//   kMiniMaxM3   NS<tool_call>\nNS<invoke name="get_weather">NS<city>Oslo NS</city>NS</invoke>\nNS</tool_call>
//                with NS = "]<]minimax[>[", objects and arrays (NS<item>) as nested elements
//   kGemma4      <|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:3}<tool_call|>   (keys sorted)
//   kLfm2        <|tool_call_start|>[get_weather(city='Oslo', days=3)]<|tool_call_end|>   (LFM2, LFM2.5)
//   kNemotron    <TOOLCALL>[{"name": "get_weather", "arguments": {..}}]</TOOLCALL>   (Nemotron Nano v2)
//   kCommandR    <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {..}}]
//                <|END_ACTION|>   (Command R7B, Cohere2 North; <|START_THINKING|> is reasoning)
//   kApriel      <tool_calls>[{"name": "get_weather", "arguments": {..}}]</tool_calls>   (Apriel 1.6)
//   kMiniMaxM1   <tool_calls>\n{"name": "get_weather", "arguments": {..}}\n</tool_calls>   (one object per line)
//   kFirefunction functools[{"name": "get_weather", "arguments": {..}}]   (firefunction-v2)
//   kGigaChat3   <|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_weather", "arguments": {..}}
//   kGigaChat31  <|function_call|>{"name": "get_weather", "arguments": {..}}   (both: one call per turn)
//   kApertus     <|tools_prefix|>[{"get_weather": {..}}]<|tools_suffix|>   (Apertus)
// docs/structured-output.md maps each template of ../shared/templates to
// its format.
// Markers such as [TOOL_CALLS] are special tokens in their vocabularies: the
// text fed to the parsers must keep them (detokenize with special tokens
// kept, or at least these: ToolCallMarkers).
//
// Arguments are the model's JSON text as written (the concatenation of the
// streamed argument fragments equals the non-streaming arguments string);
// for kQwen3Coder and Llama built-in calls they are built as JSON, and so
// are those of the syntaxes that write parameters one by one or not as
// JSON (sent whole when the call ends; the name is sent first, as soon as
// it is complete). Values written as text are typed by the request's
// tool schemas (ToolCallParseOptions::tools).
//
// A reply that ends inside a call (max_tokens; a model's stop) gives, in
// the stream as in the whole text, what a client can still use:
//   - the call's name not complete yet (nothing of the call was sent): the
//     call's text is content, as written, with its section's marker;
//   - after the name (id and name were sent): a tool call whose arguments
//     are JSON: for the syntaxes that write JSON, the text as far as it was
//     written (as OpenAI's own cut calls; a cut-off end marker after it is
//     left out); for the decoded syntaxes, the object of the parameters
//     complete before the cut (a parameter whose value or closing tag was
//     cut is left out), never the markup;
//   - a cut-off closing marker after complete calls is dropped.
// The finish_reason ("length") tells the client the call was cut.
//
// Thread-safety: functions are pure; a ToolCallStreamParser is one
// sequence's state, used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"
#include "grammar/tool_call_format.h"
#include "grammar/tool_call_stream.h"
#include "tokenizer/tokenizer.h"

namespace kvs::grammar {


// The format a chat template renders tool calls in (kNone: unknown or no
// tool support).
ToolCallFormat DetectToolCallFormat(std::string_view chat_template);
const char* ToolCallFormatName(ToolCallFormat format);
// Special-token texts that delimit calls in this format (keep them when
// detokenizing; allow them as grammar text: VocabularyOptions).
std::vector<std::string> ToolCallMarkers(ToolCallFormat format);
// The tokens of `tokenizer` that are one of the format's markers and that a
// decoder dropping special tokens drops (Mistral's [TOOL_CALLS], DeepSeek's
// <｜tool▁calls▁begin｜>, harmony's <|channel|>...), with their text: the
// server gives this text back to the tool-call parser while the client's
// content text keeps dropping special tokens. Sorted by id.
std::vector<std::pair<int32_t, std::string>> ToolCallMarkerTokens(const tok::Tokenizer& tokenizer, ToolCallFormat format);

struct ToolChoice {
  enum class Mode { kRequired, kNamed };
  Mode mode = Mode::kRequired;
  std::string name;  // kNamed
};

// The grammar of a reply that consists of tool calls in `format` (one, or
// one or more when parallel), for tools (OpenAI form) restricted by
// `choice`, each call's arguments valid against its function's
// "parameters" schema. Errors: unknown format, no tools, a named function
// that is not among the tools, or a schema the converter rejects (the
// message names the function).
StatusOr<Grammar> ToolCallGrammar(ToolCallFormat format, const nlohmann::ordered_json& tools, const ToolChoice& choice,
                                  bool parallel_tool_calls);

}  // namespace kvs::grammar
