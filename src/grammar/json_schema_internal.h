// Internal pieces of the JSON Schema converter (json_schema*.cc): GBNF text
// for JSON primitives (numbers with bounds, string formats) and the
// converter class.
// Thread-safety: pure functions; a SchemaConverter is single-use.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/json_schema.h"

namespace kvs::grammar::internal {

// Whole numbers are written with at most this many digits (so they stay
// exact as IEEE doubles, which is what validators compare).
inline constexpr int kMaxIntDigits = 15;

// GBNF for the decimal integers (no leading zeros, no "-0") in [lo, hi];
// nullopt: unbounded on that side (then limited to kMaxIntDigits digits).
// Requires lo <= hi when both are given.
std::string IntegerRangeGbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// GBNF for JSON numbers x with lo <(=) x <(=) hi for whole-number bounds
// (exclusive when the flag is set; nullopt: unbounded), without exponents.
// Empty string when no number qualifies.
std::string NumberRangeGbnf(std::optional<int64_t> lo, bool lo_exclusive, std::optional<int64_t> hi,
                            bool hi_exclusive);

// GBNF for a string format's content (between the quotes); NotFound for an
// unknown format name.
StatusOr<std::string> FormatGbnf(const std::string& format);

// The converter: one instance per schema. Visit returns a GBNF expression
// for a subschema (often a rule name) and defines the rules it needs.
class SchemaConverter {
 public:
  using Json = nlohmann::ordered_json;
  SchemaConverter(const Json& root, const JsonSchemaOptions& o, std::string prefix)
      : root_(root), o_(o), prefix_(std::move(prefix)) {}

  // The whole grammar as GBNF text.
  StatusOr<std::string> Run();
  // A shared rule ("ws", "string", "number", "integer", "value", "object",
  // "array", "char"), defined on first use; returns its name.
  std::string Common(const std::string& what);

 private:
  bool flexible() const { return o_.whitespace == JsonSchemaOptions::Whitespace::kFlexible; }
  std::string Comma() { return flexible() ? "\",\" " + Common("ws") : "\", \""; }
  std::string Colon() { return flexible() ? "\":\" " + Common("ws") : "\": \""; }
  std::string Braced(const std::string& open, const std::string& close, const std::string& inner, bool allow_empty,
                     bool repeat);
  std::string NewRule(const std::string& base, const std::string& body);
  Status Error(const std::string& path, const std::string& what) const;
  StatusOr<const Json*> Resolve(const std::string& ref, const std::string& path) const;
  StatusOr<Json> Merge(const Json& a, const Json& b, const std::string& path);
  StatusOr<std::string> Visit(const Json& s, const std::string& path, int depth);
  StatusOr<std::string> VisitRef(const Json& s, const std::string& path, int depth);
  StatusOr<std::string> VisitTyped(const Json& s, const std::string& path, int depth);
  StatusOr<std::string> VisitObject(const Json& s, const std::string& path, int depth);
  StatusOr<std::string> VisitArray(const Json& s, const std::string& path, int depth);
  StatusOr<std::string> VisitString(const Json& s, const std::string& path);
  StatusOr<std::string> VisitNumber(const Json& s, const std::string& path, bool integer);
  // A JSON object key (with quotes) that is none of `names`.
  std::string KeyNotIn(const std::vector<std::string>& names);

  const Json& root_;
  const JsonSchemaOptions& o_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;  // (name, body) in output order
  std::set<std::string> used_;                              // rule names taken
  std::set<std::string> common_;
  std::map<std::string, std::string> ref_rules_;            // $ref -> rule name
};

// Helpers shared by the converter's files.
std::string JoinAlts(const std::vector<std::string>& alts);
std::string RepeatGbnf(const std::string& x, int64_t min, int64_t max);
std::string RuleBase(const std::string& path);
std::string JsonLiteral(const nlohmann::ordered_json& value);

}  // namespace kvs::grammar::internal
