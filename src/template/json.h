// Conversions between nlohmann JSON and interpreter Values.
//
// Objects keep their key order (use nlohmann::ordered_json so parsing keeps
// it). As in @huggingface/jinja, which gets its context through JavaScript
// objects: integer-valued numbers become ints (1.0 -> 1), and keys that look
// like array indices ("0", "17") come before the other keys in ascending
// numeric order.
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/value.h"

namespace kvs::tmpl {

// Deepest JSON nesting accepted as template input.
inline constexpr int kMaxJsonDepth = 128;

StatusOr<Value> FromJson(const nlohmann::ordered_json& j);
// Parses JSON text (the from_json filter).
StatusOr<Value> ParseJsonText(std::string_view text);

}  // namespace kvs::tmpl
