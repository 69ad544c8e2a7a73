// Descriptors of the tool-call syntaxes that share one shape: optional text,
// then calls inside a section marker pair and/or call marker pairs, each
// call's arguments in one of a few encodings (JSON, key/value tags, named
// parameter tags, ...). One descriptor per ToolCallFormat from kGlm45 on;
// the stream parser (tool_call_stream_tagged.cc), the forced-call grammar
// (tool_call_grammar_tagged.cc) and ToolCallMarkers read them, so a
// format's markers are written down once. Internal to the grammar module.
//
// Invariants: a descriptor has a section_open or a call_open (what starts
// calls in content); kJsonList/kJsonObjects/kPythonic bodies have no call
// markers (the section holds JSON or Python text); the other bodies have
// call_open, call_close and name_ends.
// Thread-safety: immutable static data.
#pragma once

#include <string>
#include <vector>

#include "grammar/tool_call_format.h"

namespace kvs::grammar::internal {

struct TaggedSyntax {
  enum class Body {
    kJsonList,     // section: [{"name": .., "arguments": ..}, ...]
    kJsonObjects,  // section: {..} {..} (whitespace between)
    kJsonArgs,     // call: NAME name_end JSON call_close
    kKeyValue,     // call: NAME name_end (key_open K key_close value_open V value_close)*
    kNamedParams,  // call: NAME name_end (param_open K["|>] attrs> V param_close)*
    kMiniMaxXml,   // call: NAME name_end (NS<K>V NS</K>)*, V nested XML for objects/arrays
    kGemma,        // call: NAME{k:v,...} with <|"|> strings
    kPythonic,     // section: [f(a=1, b='x'), ...]
  };
  Body body = Body::kJsonList;
  std::string section_open, section_close;  // "" when calls stand alone / the section has no end
  std::string call_open, call_close;
  // The first of these ends a call's name (so does call_close: a call
  // without arguments); consumed unless keep_name_end (GLM's name ends at
  // "\n" or right at <arg_key>).
  std::vector<std::string> name_ends;
  bool keep_name_end = false;
  // kKeyValue tags, kNamedParams tags (param_open precedes the name), the
  // kMiniMaxXml namespace prefix (param_open, before '<').
  std::string key_open, key_close, value_open, value_close;
  std::string param_open, param_close;
  bool name_keyed = false;                  // kJsonList items are {"NAME": ARGS}
  std::vector<std::string> drop;            // markers removed from content
  std::string reasoning_open, reasoning_close;  // text between them is reasoning
  bool newline_between = true;              // the grammar writes "\n" between parts
};

// The descriptor of `format`, or null for the formats with their own code.
const TaggedSyntax* TaggedSyntaxOf(ToolCallFormat format);

// A call's name as written between call_open and name_end, cleaned up:
// Kimi-K2 writes "functions.NAME:INDEX", Solar "ID<|tool_call:name|>NAME".
std::string CleanCallName(ToolCallFormat format, std::string raw);

}  // namespace kvs::grammar::internal
