// JSON Schema -> grammar, for response_format {"type": "json_schema"} and
// tool-call arguments; plus the any-JSON-object grammar of
// response_format {"type": "json_object"}.
//
// Every string the grammar accepts is a JSON document valid against the
// schema (checked in tests with ajv); the grammar may accept only a subset
// of the valid documents (e.g. fewer number spellings). A schema using a
// construct that cannot be guaranteed is an InvalidArgument error naming
// the construct and where it is ("at /properties/tags: 'uniqueItems' is not
// supported"), which the server turns into HTTP 400.
//
// Supported (draft 2020-12 and draft-07 spellings):
//   type (one or a list), enum, const, nullable: true (OpenAPI)
//   object: properties (emitted in schema order, each required one always,
//     each optional one possibly), required, additionalProperties
//     (false / true / a schema); when absent: no extra properties if
//     `properties` is given (strict, as OpenAI and xgrammar do), any
//     properties otherwise. Extra property names never repeat a declared one.
//   array: items, prefixItems (or draft-07 array `items` + additionalItems),
//     minItems, maxItems
//   string: minLength, maxLength, pattern (regex.h, ECMA-262 subset),
//     format date, time, date-time, uuid, email, ipv4, hostname, uri
//   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (any
//     whole-number bounds; at most 15 digits)
//   number: the same bounds when they are whole numbers
//   anyOf, oneOf (as anyOf: the branches should not overlap), allOf of
//     object schemas (merged), $ref to "#", "#/$defs/..", "#/definitions/.."
//     or any local JSON pointer (recursion allowed; nesting is bounded by the
//     matcher's depth limit), boolean schemas, {} (any value)
//   ignored annotations: title, description, default, examples, $schema,
//     $id, $comment, deprecated, readOnly, writeOnly, contentMediaType, ...
// Not supported (error): multipleOf, uniqueItems, contains, not, if/then/
//   else, patternProperties, propertyNames, min/maxProperties,
//   dependentRequired/Schemas, unevaluated*, remote $ref, pattern or format
//   combined with min/maxLength, fractional number bounds, other formats.
//
// Whitespace policy (JsonSchemaOptions::whitespace):
//   kFlexible (default): between tokens (after { [ , : and before } ]) either
//     nothing, one space, or a newline and up to max_indent spaces/tabs, so
//     both compact and pretty-printed JSON can be produced but a model cannot
//     loop on whitespace. Nothing before or after the top-level value.
//   kCompact: exactly Python json.dumps's default separators ", " and ": "
//     and nothing else.
//
// Numbers: -?(0|[1-9][0-9]{0,14})(.[0-9]{1,15})?([eE][-+]?[0-9]{1,2})?;
// integers have no fraction or exponent. Strings: any characters but '"',
// backslash and controls, or the escapes \" \\ \/ \b \f \n \r \t \uXXXX (no
// surrogate escapes, so lengths count exactly as JSON Schema counts them).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/grammar.h"

namespace kvs::grammar {

struct JsonSchemaOptions {
  enum class Whitespace { kFlexible, kCompact };
  Whitespace whitespace = Whitespace::kFlexible;
  int32_t max_indent = 32;          // kFlexible: spaces/tabs after a newline
  int32_t max_schema_depth = 64;    // nesting of subschemas (not of the JSON produced)
  int32_t max_rules = 5000;         // grammar rules the schema may produce
  int32_t max_items = 1000;         // largest minItems/maxItems honoured as a count
  int32_t max_length = 1000;        // largest minLength/maxLength honoured as a count
};

// The schema as JSON text (parse errors are InvalidArgument).
StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_json, const JsonSchemaOptions& options = {});
StatusOr<Grammar> JsonSchemaToGrammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});
// Same, as GBNF text (what JsonSchemaToGrammar parses; for debugging and
// for building larger grammars, e.g. tool calls, around a schema: the
// schema's rules are prefixed with `prefix` and its start rule is named
// `prefix` + "root").
StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {},
                                       std::string_view prefix = "");

// Any JSON object (response_format json_object) / any JSON value, with the
// same whitespace and number/string policy.
Grammar JsonObjectGrammar(const JsonSchemaOptions& options = {});
Grammar AnyJsonGrammar(const JsonSchemaOptions& options = {});

}  // namespace kvs::grammar
