// Small string helpers shared by every module (ASCII case, trimming,
// replacing). Unicode-aware text handling lives where its rules are defined
// (the tokenizer's normalizers, the template engine's Python/JavaScript
// string semantics); these are for identifiers, config values and headers.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace kvs {

// s with ASCII A-Z lowered (other bytes unchanged).
std::string AsciiLower(std::string_view s);
// Whether a and b are equal ignoring ASCII case.
bool EqualsIgnoreAsciiCase(std::string_view a, std::string_view b);
// s without leading and trailing ASCII whitespace (space, \t \n \v \f \r).
std::string_view TrimAsciiSpace(std::string_view s);
// s with every occurrence of `from` replaced by `to`, left to right without
// overlaps; an empty `from` leaves s unchanged.
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to);

}  // namespace kvs
