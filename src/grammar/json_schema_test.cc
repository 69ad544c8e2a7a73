// JSON Schema -> grammar: for every schema in testdata/schemas, random walks
// through the token masks (random allowed token at each step, steered to
// finish after a budget) produce documents that ajv (tests/oracles,
// validate_json.mjs) accepts: 100 % of them. Also: unsupported constructs
// give errors naming them, and the number-range pieces are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/test_util.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"
#include "grammar/shared_vocab.h"
#include "grammar/test_util.h"

namespace kvs::grammar {
namespace json_schema_test {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// All bytes plus JSON-ish multi-character tokens that cross terminals
// ("\": ", "\", \"", digits with punctuation, partial UTF-8, ...).
std::shared_ptr<const Vocabulary> JsonishVocabulary() {
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\"}", "\": ", "\":", "\", \"", "\",\"", ", ", ",\n", "\n  ", "  ", " \"", "[\"", "\"]",
                        "[]", "{}", "[{", "}]", "true", "false", "null", " true", "12", "00", "-1", "0.", ".5", "e+", "E-",
                        "99", "2024", "-02-", "29", "T12", ":00", "Z\"", "+01:00", "name", " name", "the", " the", "ab",
                        "abc", "\\n", "\\\"", "\\u00", "\xC3\xA9", "\xC3", "\xF0\x9F", "\x98\x80", "http", "://", ".com",
                        "@", "example", "-", "yes", "no", "circle", "rect", "km"}) {
    toks.push_back(t);
  }
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  return testing::VocabularyOf(toks);
}

std::vector<fs::path> SchemaFiles() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(kvs::testing::SourceDir()) / "src/grammar/testdata/schemas")) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Walks `walks` documents per schema and checks them with ajv.
void CheckSuite(const std::shared_ptr<const Vocabulary>& vocab, const JsonSchemaOptions& opts, int walks,
                int budget, uint64_t seed) {
  const std::string missing = testing::AjvMissing();
  const std::vector<fs::path> files = SchemaFiles();
  ASSERT_GE(files.size(), 30u);
  std::mt19937_64 rng(seed);
  Json jobs = Json::array();
  size_t total = 0;
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.filename().string());
    const Json schema = Json::parse(ReadFile(f));
    auto g = JsonSchemaToGrammar(schema, opts);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto cg = CompiledGrammar::Compile(*g, vocab);
    ASSERT_TRUE(cg.ok()) << cg.status().ToString() << "\n" << g->ToGbnf();
    Json docs = Json::array();
    for (int w = 0; w < walks; ++w) {
      const testing::WalkResult r = testing::RandomWalk(*cg, rng, budget);
      ASSERT_TRUE(r.finished) << "walk did not finish: " << r.text;
      ASSERT_FALSE(Json::parse(r.text, nullptr, false).is_discarded()) << "not JSON: " << r.text;
      docs.push_back(r.text);
    }
    total += docs.size();
    jobs.push_back({{"schema", schema}, {"documents", docs}, {"file", f.filename().string()}});
  }
  if (!missing.empty()) GTEST_SKIP() << missing << "; " << total << " documents parsed as JSON but were not validated";
  const Json results = testing::RunAjv(jobs);
  ASSERT_TRUE(results.is_array() && results.size() == jobs.size()) << results.dump();
  size_t valid = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(results[i]["compiled"].get<bool>()) << jobs[i]["file"] << ": " << results[i].dump();
    for (size_t k = 0; k < results[i]["results"].size(); ++k) {
      EXPECT_TRUE(results[i]["results"][k].is_null())
          << jobs[i]["file"] << ": " << jobs[i]["documents"][k].get<std::string>() << "\n  " << results[i]["results"][k];
      valid += results[i]["results"][k].is_null();
    }
  }
  EXPECT_EQ(valid, total);
}

TEST(JsonSchemaSuite, RandomWalksAreValidFlexibleWhitespace) {
  CheckSuite(JsonishVocabulary(), JsonSchemaOptions{}, /*walks=*/8, /*budget=*/40, 11);
}

TEST(JsonSchemaSuite, RandomWalksAreValidCompact) {
  JsonSchemaOptions opts;
  opts.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  CheckSuite(JsonishVocabulary(), opts, /*walks=*/4, /*budget=*/30, 12);
}

TEST(JsonSchemaSuite, RandomWalksAreValidWithGpt2Vocabulary) {
  auto tok = testing::LoadSharedTokenizer("gpt-2");
  if (!tok.ok()) GTEST_SKIP() << tok.status().message();
  auto vocab = Vocabulary::FromTokenizer(**tok);
  ASSERT_TRUE(vocab.ok());
  // One walk per schema under the sanitizers (50,257-token masks at every
  // step, 10x slower there; the other suites keep their walks).
  CheckSuite(*vocab, JsonSchemaOptions{}, /*walks=*/::kvs::testing::SanitizerSample(3, 3), /*budget=*/25, 13);
}

TEST(JsonSchema, JsonObjectGrammarGivesObjects) {
  const std::string missing = testing::AjvMissing();
  auto cg = CompiledGrammar::Compile(JsonObjectGrammar(), JsonishVocabulary());
  ASSERT_TRUE(cg.ok());
  std::mt19937_64 rng(5);
  Json docs = Json::array();
  for (int w = 0; w < 20; ++w) {
    const auto r = testing::RandomWalk(*cg, rng, 40);
    ASSERT_TRUE(r.finished);
    const Json v = Json::parse(r.text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << r.text;
    docs.push_back(r.text);
  }
  EXPECT_TRUE(testing::Matches(JsonObjectGrammar().ToGbnf(), "{\"a\": [1, {\"b\": null}], \"c\": \"\\u00e9\"}"));
  EXPECT_TRUE(testing::Matches(JsonObjectGrammar().ToGbnf(), "{\n  \"a\": 1,\n  \"b\": [\n    true\n  ]\n}"));
  EXPECT_FALSE(testing::Matches(JsonObjectGrammar().ToGbnf(), "[1]"));
  EXPECT_FALSE(testing::Matches(JsonObjectGrammar().ToGbnf(), " {}"));
  if (!missing.empty()) GTEST_SKIP() << missing;
  const Json results = testing::RunAjv(Json::array({{{"schema", {{"type", "object"}}}, {"documents", docs}}}));
  for (const Json& r : results[0]["results"]) EXPECT_TRUE(r.is_null()) << r;
}

TEST(JsonSchema, UnsupportedConstructsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"integer","multipleOf":3})", "'multipleOf' is not supported"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"object","properties":{"a":{"not":{"type":"string"}}}})", "at '/properties/a': 'not'"},
      {R"({"if":{"type":"string"},"then":{"maxLength":3}})", "'if'"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties'"},
      {R"({"$ref":"https://example.com/s.json"})", "only local $ref"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"type":"string","format":"ipv6"})", "format 'ipv6' is not supported"},
      {R"({"type":"string","pattern":"^(a)\\1$"})", "backreferences"},
      {R"j({"type":"string","pattern":"(?=a)"})j", "lookaround"},
      {R"({"type":"string","pattern":"a+","maxLength":3})", "'pattern' combined with minLength/maxLength"},
      {R"({"type":"number","minimum":0.5})", "fractional bound"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer"},
      {R"({"type":"string","minLength":5,"maxLength":2})", "minLength is larger"},
      {R"({"type":"tuple"})", "unknown type 'tuple'"},
      {R"(false)", "admits no value"},
      {R"({"type":"string","enum":[1,2]})", "no 'enum' value"},
      {R"({"allOf":[{"properties":{"a":{}},"required":["a"]},{"properties":{"b":{}},"additionalProperties":false}]})",
       "never be satisfied"},
      {R"({"type":"object",)", "not valid JSON"},
  };
  for (const auto& [schema, want] : cases) {
    auto g = JsonSchemaToGrammar(std::string_view(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << schema;
    EXPECT_NE(g.status().message().find(want), std::string::npos) << schema << " -> " << g.status().message();
  }
  // A recursive schema that can never finish is rejected when compiled.
  auto g = JsonSchemaToGrammar(std::string_view(
      R"({"type":"object","properties":{"child":{"$ref":"#"}},"required":["child"],"additionalProperties":false})"));
  ASSERT_TRUE(g.ok());
  auto cg = CompiledGrammar::Compile(*g, JsonishVocabulary());
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("never finish"), std::string::npos) << cg.status().message();
  // Deep schemas hit the depth limit with a clear message.
  Json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  auto gd = JsonSchemaToGrammar(deep);
  ASSERT_FALSE(gd.ok());
  EXPECT_NE(gd.status().message().find("nested deeper"), std::string::npos);
}

TEST(JsonSchema, IntegerRangesAreExact) {
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 0}, {-15, 7}, {1, 9}, {10, 99}, {-99, -10}, {7, 1234}, {-1234, -7}, {1990, 2030}, {-5, 5}, {100, 100},
      {95, 105}, {-105, -95}, {0, 1000}, {{}, 20}, {-20, {}}};
  for (auto [lo, hi] : ranges) {
    const std::string expr = internal::IntegerRangeGbnf(lo, hi);
    const auto cg = testing::CompileOrDie("root ::= " + expr, testing::ByteVocabulary());
    ASSERT_NE(cg, nullptr);
    const int64_t from = lo.value_or(-3000) - 30, to = hi.value_or(3000) + 30;
    for (int64_t v = from; v <= to; ++v) {
      GrammarMatcher m(cg);
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      const bool matched = m.AcceptBytes(std::to_string(v)).ok() && m.CanEnd();
      ASSERT_EQ(matched, in) << v << " in [" << lo.value_or(-1) << "," << hi.value_or(-1) << "]: " << expr;
    }
    GrammarMatcher m(cg);
    EXPECT_FALSE(m.AcceptBytes("-0").ok() && m.CanEnd());
  }
}

TEST(JsonSchema, NumberRangesAreExact) {
  struct Case {
    std::optional<int64_t> lo;
    bool loex;
    std::optional<int64_t> hi;
    bool hiex;
  };
  const std::vector<Case> cases = {{0, false, 1, false}, {0, true, {}, false}, {-3, false, 0, true},
                                   {-40, false, 60, false}, {{}, false, -2, true}, {5, true, 7, true},
                                   {-1, true, 1, true}, {2, false, 2, false}};
  std::mt19937_64 rng(3);
  for (const Case& c : cases) {
    const std::string expr = internal::NumberRangeGbnf(c.lo, c.loex, c.hi, c.hiex);
    const auto cg = testing::CompileOrDie("root ::= " + expr, testing::ByteVocabulary());
    ASSERT_NE(cg, nullptr);
    for (int k = 0; k < 3000; ++k) {
      // Random decimal strings around the bounds.
      const int64_t ip = static_cast<int64_t>(rng() % 140) - 70;
      std::string s = std::to_string(std::llabs(ip));
      if (ip < 0 || (ip == 0 && rng() % 3 == 0)) s = "-" + s;
      if (rng() % 2) {
        s += ".";
        for (int d = 0, n = 1 + static_cast<int>(rng() % 3); d < n; ++d) s += static_cast<char>('0' + rng() % 10);
      }
      const double v = std::stod(s);
      const bool in = (!c.lo || (c.loex ? v > *c.lo : v >= *c.lo)) && (!c.hi || (c.hiex ? v < *c.hi : v <= *c.hi));
      GrammarMatcher m(cg);
      const bool matched = m.AcceptBytes(s).ok() && m.CanEnd();
      if (matched) {
        ASSERT_TRUE(in) << s << " accepted by " << expr;
      }
      // Every value in range has some accepted spelling; canonical ones
      // (no trailing zeros, no "-0") must be accepted.
      const bool canonical = !(s.find('.') != std::string::npos && s.back() == '0') && s != "-0";
      if (in && canonical) {
        ASSERT_TRUE(matched) << s << " rejected by " << expr;
      }
    }
  }
}

TEST(JsonSchema, GbnfIsReadableAndPrefixed) {
  const Json schema = Json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  auto text = JsonSchemaToGbnf(schema, {}, "args-");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->rfind("args-root ::= ", 0), 0u) << *text;
  EXPECT_NE(text->find("\"\\\"city\\\"\""), std::string::npos) << *text;
  EXPECT_EQ(text->find("\nroot ::="), std::string::npos);
}

}  // namespace json_schema_test
}  // namespace kvs::grammar
