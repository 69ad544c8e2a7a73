// The nesting depth of JSON text and the members of its objects, counted
// on the raw text, so that parsers with recursive descent (nlohmann's) or
// linear key lookup (ordered_json) can refuse such input before they see it. Used by the HTTP API's body parser and the templates' from_json.
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvs {

// The deepest nesting of arrays and objects in JSON text: brackets outside
// strings (escapes honoured); a closer with nothing open is ignored.
// Counting stops once the depth exceeds stop_after (the result is then
// stop_after + 1). The text need not be valid JSON.
size_t JsonNestingDepth(std::string_view text, size_t stop_after);

// Members of the largest object and of all objects together, counted on the
// raw text as the colons outside strings at each nesting level (exact for
// valid JSON, a bound otherwise). Why: nlohmann::ordered_json finds each new
// key by a linear search of its object, so parsing an object of n members
// costs n^2 / 2 key comparisons (100,000 members: 10 s of CPU); callers
// refuse input whose objects would make the parse quadratic.
struct JsonMembers {
  size_t largest = 0;
  size_t total = 0;
};
JsonMembers CountJsonObjectMembers(std::string_view text);

// Elements of the largest array and of all arrays together, counted on the
// raw text (commas outside strings directly inside an array, plus one for a
// non-empty array; exact for valid JSON, a bound otherwise). Why: each
// element costs the parser 16-32 bytes, so a 24 MiB body of "[0,0,0,...]"
// would become ~400 MB of parsed values; callers refuse it before parsing.
struct JsonElements {
  size_t largest = 0;
  size_t total = 0;
};
JsonElements CountJsonArrayElements(std::string_view text);

// Both counts in one pass over the text (a request body is scanned once).
struct JsonCounts {
  JsonMembers members;
  JsonElements elements;
};
JsonCounts CountJsonContainers(std::string_view text);

}  // namespace kvs
