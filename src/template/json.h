// Conversions between nlohmann JSON and interpreter Values.
//
// Objects keep their key order (use nlohmann::ordered_json so parsing keeps
// it). As in @huggingface/jinja, which gets its context through JavaScript
// objects: integer-valued numbers become ints (1.0 -> 1), and keys that look
// like array indices ("0", "17") come before the other keys in ascending
// numeric order.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/value.h"

namespace kvs::tmpl {

// Deepest JSON nesting accepted as template input.
inline constexpr int kMaxJsonDepth = 128;
// Members of any one object in JSON text parsed for a template (from_json):
// ordered_json's parse costs an object's members squared.
inline constexpr size_t kMaxJsonObjectMembers = 4096;

// Bounds of one conversion (a request's messages can be megabytes): any one
// array or object, and the bytes of the values made (strings plus a Value
// per item), as RenderLimits' max_list_items and max_total_bytes.
struct JsonLimits {
  size_t max_items = SIZE_MAX;
  size_t max_bytes = SIZE_MAX;
};

// content: every string (and key) in j is the caller's data (spans.h).
// Errors: nesting deeper than kMaxJsonDepth, a limit exceeded.
StatusOr<Value> FromJson(const nlohmann::ordered_json& j, bool content = false, const JsonLimits& limits = {});
// Parses JSON text (the from_json filter); content and limits as for FromJson.
StatusOr<Value> ParseJsonText(std::string_view text, bool content = false, const JsonLimits& limits = {});

}  // namespace kvs::tmpl
