// Reading request bodies: the helpers every dialect's parser (Chat
// Completions, Completions, Responses, Messages, structured output) uses to
// read a field and to word its errors, so that the dialects name types and
// missing fields alike.
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/error.h"

namespace kvs::api {

using Json = nlohmann::ordered_json;

// "a string", "an array", ...: how error messages name a JSON value's type.
const char* JsonTypeName(const Json& j);
// At most max_bytes of s (cut on a UTF-8 boundary, "..." appended when cut):
// how error messages quote untrusted strings.
std::string Clip(std::string_view s, size_t max_bytes);

namespace dialect {
// A field's value; nullptr when absent or null.
const Json* Field(const Json& obj, const char* name);
std::optional<ApiError> WrongType(const std::string& param, const char* want, const Json& got);
// 400 unsupported_parameter: "'param' is not supported: why".
std::optional<ApiError> NotSupported(const std::string& param, const std::string& why);
// obj[name] as a string (p names obj in errors); 400 when absent or not one.
std::optional<ApiError> RequiredString(const Json& obj, const char* name, const std::string& p, std::string* out);
// obj[name], which must be present (p names obj in errors): 400
// missing_required_parameter when absent or null.
std::optional<ApiError> Required(const Json& obj, const char* name, const std::string& p, const Json** out);
// The text of a content value: a string as it is, or an array of parts
// whose texts are joined with "\n". part_text checks one part (an object; p
// is its param name) and says its text: the APIs differ in which part types
// they serve. `parts` and `part` name them in type errors ("content parts",
// "an object"). *out is set only on success.
using PartText = std::function<std::optional<ApiError>(const Json& part, const std::string& p, std::string* text)>;
std::optional<ApiError> JoinedText(const Json& content, const std::string& param, const char* parts, const char* part,
                                   const PartText& part_text, std::string* out);
// ParseChatRequest's errors in the dialect's field names: the first
// matching (from, to) prefix of the param is replaced, and in the message.
ApiError RenameParam(ApiError e, const std::vector<std::pair<std::string, std::string>>& prefixes);
}  // namespace dialect

}  // namespace kvs::api
