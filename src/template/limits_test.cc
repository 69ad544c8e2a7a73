// Budgets of one render (issue 10, item 3): hostile templates and hostile
// inputs fail that render with a clear error (ResourceExhausted or
// DeadlineExceeded naming the budget), never the process, and never after
// minutes of work or gigabytes of memory. Each test here failed (hung, ran
// out of memory, crashed or rendered without limit) before the fix it pins.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "template/chat_template.h"
#include "template/json.h"
#include "template/template.h"

namespace kvs::tmpl {
namespace limits_test {

using nlohmann::ordered_json;

// A time budget generous enough that the byte, list and iteration budgets
// are what a test meets, not the speed of a (possibly loaded, possibly
// sanitized) machine; the wall clock has its own test.
RenderOptions Patient() {
  RenderOptions opt;
  opt.limits.max_seconds = 300;
  return opt;
}

StatusOr<std::string> Render(std::string_view source, const RenderOptions& opt = Patient(),
                          const ordered_json& context = ordered_json::object()) {
  KVS_ASSIGN_OR_RETURN(Template t, Template::Parse(std::string(source)));
  return t.Render(context, opt);
}

#define EXPECT_EXHAUSTED(expr)                                                                        \
  do {                                                                                                \
    auto r_ = (expr);                                                                                 \
    EXPECT_FALSE(r_.ok()) << #expr << " rendered " << (r_.ok() ? r_->size() : 0) << " bytes";         \
    if (!r_.ok()) {                                                                                   \
      EXPECT_EQ(r_.status().code(), StatusCode::kResourceExhausted) << r_.status().ToString();        \
    }                                                                                                 \
  } while (0)

// Either budget: which one a default-limits case meets first depends on the
// machine's speed.
#define EXPECT_BUDGET_EXCEEDED(expr)                                                                 \
  do {                                                                                               \
    auto r_ = (expr);                                                                                \
    EXPECT_FALSE(r_.ok()) << #expr << " rendered " << (r_.ok() ? r_->size() : 0) << " bytes";        \
    if (!r_.ok()) {                                                                                  \
      EXPECT_TRUE(r_.status().code() == StatusCode::kResourceExhausted ||                            \
                  r_.status().code() == StatusCode::kDeadlineExceeded)                               \
          << r_.status().ToString();                                                                 \
    }                                                                                                \
  } while (0)

#define EXPECT_RENDERS(expr, want)                                  \
  do {                                                              \
    auto r_ = (expr);                                               \
    ASSERT_TRUE(r_.ok()) << #expr << ": " << r_.status().ToString(); \
    EXPECT_EQ(*r_, want);                                           \
  } while (0)

// `[x, x]` shares x, so 60 doublings are tiny in memory but 2^60 leaves when
// printed: every way of printing it stops at the output budget.
TEST(TemplateBudgetTest, SharedListGrowthIsBoundedWhenPrinted) {
  const std::string grow =
      "{% set ns = namespace(x=['abc']) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}";
  EXPECT_BUDGET_EXCEEDED(Render(grow + "{{ ns.x | tojson }}", RenderOptions()));  // the default limits
  RenderOptions small = Patient();
  small.limits.max_output_bytes = 1 << 20;
  EXPECT_EXHAUSTED(Render(grow + "{{ ns.x | tojson(indent=2) }}", small));
  EXPECT_EXHAUSTED(Render(grow + "{{ ns.x }}", small));
  EXPECT_EXHAUSTED(Render(grow + "{{ ns.x | string }}", small));
  EXPECT_EXHAUSTED(Render(grow + "{{ ns.x ~ '' }}", small));
  EXPECT_EXHAUSTED(Render(grow + "{{ ns.x | join(',') }}", small));
  EXPECT_EXHAUSTED(Render(grow + "{{ ns | tojson }}", small));
  // Printed pieces that are each small add up against the total budget.
  small.limits.max_total_bytes = 8 << 20;
  EXPECT_EXHAUSTED(Render(grow + "{% for i in range(100) %}{% set s = ns.x[0][0][0][0][0][0][0][0][0][0][0][0] | tojson %}"
                                 "{% endfor %}",
                          small));
}

// Every render has a wall-clock budget (1 s by default): work that no
// byte or iteration budget catches (a quadratic template) stops there.
TEST(TemplateBudgetTest, WallClockBudgetStopsQuadraticWork) {
  RenderOptions opt;
  opt.limits.max_seconds = 0.2;
  RenderStats stats;
  opt.stats = &stats;
  auto r = Render("{% set l = range(200000) %}{% for i in l %}{% if -1 in l %}{% endif %}{% endfor %}", opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("time budget of 0.2 s"), std::string::npos) << r.status().message();
  EXPECT_LT(stats.loop_iterations, 2 * 200000u) << "range() counts 200000, the loop stopped long before its end";
  // The default budget applies when none is given.
  // (Membership tests are not counted by any other budget, so only the
  // clock can stop this one, on a fast machine as on a slow one.)
  EXPECT_EQ(Render("{% set l = range(200000) %}{% for i in l %}{% if -1 in l %}{% endif %}{% endfor %}", RenderOptions())
                .status()
                .code(),
            StatusCode::kDeadlineExceeded);
}

// Loop and macro scopes are freed when they end (they used to live until
// the end of the render: 100k macro calls kept 100k scopes).
TEST(TemplateBudgetTest, ScopesAreFreedWhenTheyEnd) {
  RenderOptions opt = Patient();
  RenderStats stats;
  opt.stats = &stats;
  ASSERT_TRUE(Render("{% macro f(x) %}{% for c in [x] if c %}{{ c }}{% endfor %}{% endmacro %}"
                     "{% for i in range(100000) %}{{ f(i) | length }}{% endfor %}",
                     opt)
                  .ok());
  EXPECT_LT(stats.peak_live_scopes, 20u);
  // A macro that escapes its scope keeps it alive; the render still ends clean
  // (ASan's leak checker objects to a cycle that is not broken).
  EXPECT_RENDERS(Render("{% set ns = namespace() %}{% macro outer(v) %}{% macro inner() %}{{ v }}{% endmacro %}"
                        "{% set ns.f = inner %}{% endmacro %}{{ outer(7) }}{{ ns.f() }}"),
                 "7");
}

TEST(TemplateBudgetTest, RepetitionCannotWrapAround) {
  // 4 * 2^62 wraps to 0 in 64 bits.
  EXPECT_EXHAUSTED(Render("{{ ([0, 0, 0, 0] * 4611686018427387904) | length }}"));
  EXPECT_EXHAUSTED(Render("{{ (4611686018427387904 * [0, 0, 0, 0]) | length }}"));
  EXPECT_EXHAUSTED(Render("{{ ('abcd' * 4611686018427387904) | length }}"));
  EXPECT_EXHAUSTED(Render("{{ ([0] * 9223372036854775807) | length }}"));
  EXPECT_EXHAUSTED(Render("{{ ([0] * 2000000) | length }}"));  // over the list-size limit
  EXPECT_RENDERS(Render("{{ ([1, 2] * 3) | length }} {{ 'ab' * 2 }} {{ [1] * -5 }}"), "6 abab []");
}

TEST(TemplateBudgetTest, ExtremeSliceStepsFollowPython) {
  EXPECT_RENDERS(Render("{{ [1, 2, 3][1::9223372036854775807] }}"), "[2]");
  EXPECT_RENDERS(Render("{{ [1, 2, 3][::-9223372036854775807] }}"), "[3]");
  EXPECT_RENDERS(Render("{{ [1, 2, 3][::(-9223372036854775807 - 1)] }}"), "[3]");
  EXPECT_RENDERS(Render("{{ 'abc'[1::9223372036854775807] }}|{{ 'abc'[::-9223372036854775807] }}"), "b|c");
  EXPECT_RENDERS(Render("{{ [1, 2, 3][9223372036854775807::-1] }}"), "[3, 2, 1]");
  EXPECT_RENDERS(Render("{{ [1, 2, 3][(-9223372036854775807 - 1):] }}"), "[1, 2, 3]");
  EXPECT_RENDERS(Render("{{ [1, 2, 3][(-9223372036854775807 - 1)::-1] }}"), "[]");
  EXPECT_RENDERS(Render("{{ [1, 2, 3][2:(-9223372036854775807 - 1):-1] }}"), "[3, 2, 1]");
  EXPECT_RENDERS(Render("{{ [1, 2, 3, 4, 5][-2:1:-2] }}{{ 'abcdef'[5:0:-3] }}"), "[4]fc");
}

TEST(TemplateBudgetTest, StringAndListFiltersCountAgainstTheBudgets) {
  EXPECT_EXHAUSTED(Render("{{ [1] | batch(1000000000000, 0) | length }}"));
  // 1 MB in, 101 MB out: over the 64 MiB string budget.
  EXPECT_EXHAUSTED(Render("{{ ('x' * 1000000) | replace('', 'y' * 100) | length }}"));
  EXPECT_EXHAUSTED(Render("{{ ('x' * 1000000).replace('', 'y' * 100) | length }}"));
  EXPECT_EXHAUSTED(Render("{% set s = 'x' * 1000000 %}{{ ([s] * 100) | join(s) | length }}"));
  EXPECT_EXHAUSTED(Render("{{ ('\\n' * 1000000) | indent('x' * 100, blank=true) | length }}"));
  // range() creates 1M items a call: 100 calls are 100M items of work.
  EXPECT_EXHAUSTED(Render("{% for i in range(100) %}{% set r = range(1000000) %}{% endfor %}ok"));
  // Turning a 20M-character string into 20M one-character strings.
  EXPECT_EXHAUSTED(Render("{{ ('x' * 20000000) | list | length }}"));
  EXPECT_EXHAUSTED(Render("{% for c in 'x' * 20000000 %}{% endfor %}"));
  EXPECT_EXHAUSTED(Render("{{ ('x,' * 10000000).split(',') | length }}"));
  EXPECT_RENDERS(Render("{{ [1, 2, 3] | batch(2, 0) | list }} {{ 'a\\nb' | indent(2, true) }}"), "[[1, 2], [3, 0]]   a\n  b");
}

// A chain of values 300k levels deep is freed without recursion (it used to
// overflow the stack when the render's values were destroyed).
TEST(TemplateBudgetTest, DeepValueChainsAreFreedWithoutRecursion) {
  const RenderOptions opt = Patient();
  for (const char* link : {"[ns.x]", "{'a': ns.x}", "[ns.x, ns.x.copy]", "namespace(p=ns.x)"}) {
    const std::string src = std::string("{% set ns = namespace(x=[]) %}{% for i in range(300000) %}{% set ns.x = ") +
                            link + " %}{% endfor %}done";
    SCOPED_TRACE(link);
    EXPECT_RENDERS(Render(src, opt), "done");
  }
}

// JSON coming in (a request's messages, from_json) is bounded like lists
// built in the template.
TEST(TemplateBudgetTest, JsonInputIsBounded) {
  std::string big = "[0";
  for (int i = 0; i < 2'000'000; ++i) big += ",0";
  big += "]";
  auto chat = ChatTemplate::Parse("{{ tools | length }}");
  ASSERT_TRUE(chat.ok());
  ChatRequest request;
  request.tools = ordered_json::array({1, 2});
  EXPECT_RENDERS(chat->Render(request, Patient().limits), "2");
  request.tools = ordered_json::parse(big);  // one array of 2M items
  EXPECT_EXHAUSTED(chat->Render(request, Patient().limits));
  EXPECT_EXHAUSTED(Render("{{ ('[' ~ ('0,' * 2000000) ~ '0]') | from_json | length }}"));
  EXPECT_RENDERS(Render("{{ ('[' ~ ('0,' * 2000) ~ '0]') | from_json | length }}"), "2001");
  // An object's members are bounded before parsing (ordered_json's parse is
  // quadratic in them: 100,000 members took 10 s).
  auto object_of = [](size_t n) {
    std::string s = "{";
    for (size_t i = 0; i < n; ++i) s += (i > 0 ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    return s + "}";
  };
  EXPECT_RENDERS(Render("{{ s | from_json | length }}", Patient(), ordered_json{{"s", object_of(kMaxJsonObjectMembers)}}),
                 std::to_string(kMaxJsonObjectMembers));
  EXPECT_EXHAUSTED(Render("{{ s | from_json | length }}", Patient(), ordered_json{{"s", object_of(100000)}}));
}

// Dicts with many keys are indexed: building one is not quadratic.
TEST(TemplateBudgetTest, LargeDictsAreIndexed) {
  EXPECT_RENDERS(Render("{% set ns = namespace(l=[]) %}{% for i in range(200000) %}{% set _ = ns.l.append(['k' ~ i, i]) %}"
                        "{% endfor %}{% set d = dict(ns.l) %}{{ d | length }} {{ d['k7'] }}",
                        Patient()),
                 "200000 7");
  EXPECT_RENDERS(Render("{{ range(300000) | unique | list | length }}", Patient()), "300000");
  // JSON objects with index-like keys ("0", "1", ...) are ordered without a
  // key lookup per key.
  std::string text = "{\"big\": {";
  for (int i = 0; i < 20000; ++i) text += (i ? ",\"" : "\"") + std::to_string(19999 - i) + "\": " + std::to_string(i);
  text += "}}";
  EXPECT_RENDERS(Render("{{ big | length }} {{ (big | list)[0] }} {{ big['0'] }}", Patient(), ordered_json::parse(text)),
                 "20000 0 19999");
}

}  // namespace limits_test
}  // namespace kvs::tmpl
