// The nesting depth of JSON text, counted on the raw text, so that parsers
// with recursive descent (nlohmann's) can refuse deep input before they see
// it. Used by the HTTP API's body parser and the templates' from_json.
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

}  // namespace kvs
