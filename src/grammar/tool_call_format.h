// The tool-call syntaxes kvserve knows (tool_calls.h describes each with an
// example). A header of its own so that the syntax descriptors and the
// stream parser, which tool_calls.cc uses, can name a format without
// depending on tool_calls.h.
#pragma once

namespace kvs::grammar {

enum class ToolCallFormat {
  kNone,
  kHermes,
  kQwen3Coder,
  kLlama3,
  kMistral,
  kDeepSeekV3,   // also parses V3.1's syntax
  kDeepSeekV31,  // parsed like kDeepSeekV3; differs in the forced-call grammar
  kFunctionary,
  kHarmony,
  // Formats of tool_call_syntax.h (one descriptor each).
  kGlm45,        // GLM-4.5/4.6, poolside Laguna
  kHy3,          // Tencent Hy3
  kKimiK2,
  kSolarOpen,
  kDeepSeekV32,  // DSML <｜DSML｜function_calls>
  kDeepSeekV4,   // DSML <｜DSML｜tool_calls>
  kAtem,         // Muse Glimmer
  kMiniCpm5,
  kSeedOss,
  kMiniMaxM3,
  kGemma4,
  kLfm2,
  kNemotron,
  kCommandR,     // Command R7B, Cohere2 (North)
  kApriel,
  kMiniMaxM1,
  kFirefunction,
  kGigaChat3,
  kGigaChat31,
  kApertus,
};

}  // namespace kvs::grammar
