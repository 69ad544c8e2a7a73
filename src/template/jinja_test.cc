// Language features of the Jinja interpreter, one construct at a time. The
// expected strings follow @huggingface/jinja where it defines the behaviour
// (checked with tests/oracles/render_template.mjs) and Jinja2 elsewhere.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/test_util.h"
#include "template/template.h"

namespace kvs::tmpl {
namespace jinja_test {

using nlohmann::ordered_json;

StatusOr<std::string> Try(std::string_view source, std::string_view context = "{}", RenderOptions opt = {}) {
  KVS_ASSIGN_OR_RETURN(Template t, Template::Parse(std::string(source)));
  return t.Render(ordered_json::parse(context), opt);
}

std::string R(std::string_view source, std::string_view context = "{}") {
  auto r = Try(source, context);
  EXPECT_TRUE(r.ok()) << source << " -> " << r.status().ToString();
  return r.ok() ? *r : "<error>";
}

std::string Err(std::string_view source, std::string_view context = "{}") {
  auto r = Try(source, context);
  EXPECT_FALSE(r.ok()) << source << " rendered " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.status().message();
}

TEST(JinjaTest, TextAndOutput) {
  EXPECT_EQ(R("hello"), "hello");
  EXPECT_EQ(R("a\n"), "a");  // one trailing newline is dropped
  EXPECT_EQ(R("a\n\n"), "a\n");
  EXPECT_EQ(R("{{ 'x' }}{{ \"y\" }}"), "xy");
  EXPECT_EQ(R("{{ 'a' 'b' }}"), "ab");
  EXPECT_EQ(R("{{ '\\n\\t\\u00e9\\x41\\\\' }}"), "\n\t\xC3\xA9" "A\\");
  EXPECT_EQ(R("{{ x }}", R"({"x": "v"})"), "v");
  EXPECT_EQ(R("[{{ missing }}][{{ none }}]"), "[][]");
  EXPECT_EQ(R("{{ true }} {{ false }} {{ True }}"), "true false true");
  EXPECT_EQ(R("{{ {'a': 1} }}"), "{\"a\": 1}");
}

TEST(JinjaTest, Numbers) {
  EXPECT_EQ(R("{{ 1 + 2 }} {{ 7 - 10 }} {{ 3 * 4 }}"), "3 -3 12");
  EXPECT_EQ(R("{{ 1.0 }} {{ 1.5 }} {{ 2 / 4 }} {{ 4 / 2 }} {{ -0.0 }}"), "1.0 1.5 0.5 2.0 -0.0");
  EXPECT_EQ(R("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7.5 // 2 }}"), "3 -4 3.0");
  EXPECT_EQ(R("{{ 7 % 3 }} {{ -7 % 3 }}"), "1 -1");  // JavaScript's remainder, as the oracle
  EXPECT_EQ(R("{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2.0 ** 2 }}"), "1024 0.5 4.0");
  EXPECT_EQ(R("{{ 0.1 + 0.2 }}"), "0.30000000000000004");
  EXPECT_EQ(R("{{ 0.0000001 * 1.5 }} {{ 100000000000000000000.0 * 10 }}"), "1.5e-7 1e+21");
}

TEST(JinjaTest, WhitespaceControl) {
  EXPECT_EQ(R("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("a {#- note -#} b"), "ab");
  EXPECT_EQ(R("a {# note #} b"), "a  b");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the
  // indentation before it goes. Expression tags keep both.
  EXPECT_EQ(R("{% if true %}\n    x\n    {% endif %}\ny"), "    x\ny");
  EXPECT_EQ(R("  {{ 'x' }}\ny"), "  x\ny");
  EXPECT_EQ(R("{% set a = 1 %}\n{{ a }}\n"), "1");
  EXPECT_EQ(R("{# c #}\nz"), "z");
}

TEST(JinjaTest, IfElifElse) {
  const char* t = "{% if x > 2 %}big{% elif x > 0 %}small{% else %}none{% endif %}";
  EXPECT_EQ(R(t, R"({"x": 5})"), "big");
  EXPECT_EQ(R(t, R"({"x": 1})"), "small");
  EXPECT_EQ(R(t, R"({"x": 0})"), "none");
  EXPECT_EQ(R("{% if [] %}a{% elif {} %}b{% elif '' %}c{% elif 0.0 %}d{% else %}e{% endif %}"), "e");
}

TEST(JinjaTest, ForLoops) {
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
              "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032truefalse3;2121falsefalse3;3210falsetrue3;");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in xs if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", R"({"xs": [1, 2, 3, 4, 5]})"),
            "13 33 53 ");
  EXPECT_EQ(R("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "b=1,a=2,");
  EXPECT_EQ(R("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"b": 1, "a": 2}})"), "ba");
  EXPECT_EQ(R("{% for c in 'héllo' %}{{ c }}.{% endfor %}"), "h.é.l.l.o.");
  EXPECT_EQ(R("{% for x in undefined_thing %}a{% else %}b{% endfor %}"), "b");
  EXPECT_EQ(R("{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ x }}-{{ loop.nextitem }};{% endfor %}"),
            "-1-2;1-2-3;2-3-;");
  EXPECT_EQ(R("{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "ababa");
  EXPECT_EQ(R("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}"
              "{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(R("{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }}|"
              "{% endfor %}"),
            "1x1 1y2 1|2x1 2y2 2|");
  // A `set` in a loop body stays in the loop; a namespace carries state out.
  EXPECT_EQ(R("{% set x = 0 %}{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set x = i %}"
              "{% set ns.n = ns.n + i %}{% endfor %}{{ x }} {{ ns.n }}"),
            "0 3");
  EXPECT_NE(Err("{% for a, b in [1, 2] %}{% endfor %}").find("Cannot unpack non-iterable type: IntegerValue"),
            std::string::npos);
  EXPECT_NE(Err("{% for x in 5 %}{% endfor %}").find("Expected iterable or object type in for loop: got IntegerValue"),
            std::string::npos);
}

TEST(JinjaTest, Set) {
  EXPECT_EQ(R("{% set a = 'x' %}{% set b, c = 1, 2 %}{{ a }}{{ b }}{{ c }}"), "x12");
  EXPECT_EQ(R("{% set block %}A{{ 1 + 1 }}B{% endset %}[{{ block }}]"), "[A2B]");
  EXPECT_EQ(R("{% set ns = namespace(a=1, b='q') %}{% set ns.a = ns.a + 1 %}{{ ns.a }}{{ ns.b }}{{ ns.c }}"), "2q");
  EXPECT_EQ(R("{% set ns = namespace({'k': 5}) %}{{ ns.k }}"), "5");
  EXPECT_NE(Err("{% set d = {} %}{% set d.x = 1 %}").find("only namespace() objects"), std::string::npos);
}

TEST(JinjaTest, Macros) {
  EXPECT_EQ(R("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('Ann') }} {{ greet('Bo', '?') }} {{ greet(punct='.', name='Cy') }}"),
            "Hi Ann! Hi Bo? Hi Cy.");
  // Defaults may refer to earlier parameters.
  EXPECT_EQ(R("{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}"), "36");
  EXPECT_EQ(R("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, x=3) }}"), "1[2]{\"x\": 3}");
  EXPECT_EQ(R("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}"
              "{{ fact(5) }}"),
            "120");
  EXPECT_EQ(R("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
              "{% call wrap('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(R("{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}"
              "{% call(item, i) each(['a', 'b']) %}{{ i }}{{ item }} {% endcall %}"),
            "1a 2b ");
  // Macros see the scope they were defined in, not the caller's.
  EXPECT_EQ(R("{% set v = 'outer' %}{% macro show() %}{{ v }}{% endmacro %}"
              "{% for v in ['loop'] %}{{ show() }}{% endfor %}"),
            "outer");
  EXPECT_NE(Err("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("takes not more than 1 argument"),
            std::string::npos);
  EXPECT_NE(Err("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}").find("no keyword argument 'b'"), std::string::npos);
}

TEST(JinjaTest, FilterBlockAndGenerationAndRaw) {
  EXPECT_EQ(R("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(R("{%- filter trim -%}   padded   {%- endfilter -%}!"), "padded!");
  EXPECT_EQ(R("a{% generation %}b{% endgeneration %}c"), "abc");
  EXPECT_EQ(R("a {%- generation -%} b {%- endgeneration -%} c"), "abc");
  EXPECT_EQ(R("{% raw %}{{ not a tag }}{% endraw %}"), "{{ not a tag }}");
}

TEST(JinjaTest, Expressions) {
  EXPECT_EQ(R("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ [] or [1] }} {{ not 0 }}"), "x b [1] true");
  EXPECT_EQ(R("{{ 2 in [1, 2] }} {{ 'b' in 'abc' }} {{ 'k' in d }} {{ 'z' not in d }}", R"({"d": {"k": 1}})"),
            "true true true true");
  EXPECT_EQ(R("{{ 'y' if n > 1 else 'n' }}{{ 'x' if false }}|", R"({"n": 2})"), "y|");
  EXPECT_EQ(R("{{ 1 == 1.0 }} {{ '1' == 1 }} {{ none == undefined_var }} {{ [1] == [1] }}"), "true true true false");
  EXPECT_EQ(R("{{ 'ab' < 'b' }} {{ 3 >= 3 }} {{ 2 != 3 }}"), "true true true");
  EXPECT_EQ(R("{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ 1.0 ~ true }} {{ 'n' + 1 }} {{ [1] + [2] }}"), "ab a11true n1 [1, 2]");
  EXPECT_EQ(R("{{ '-' * 3 }}"), "---");
  EXPECT_EQ(R("{{ xs[0] }}{{ xs[-1] }}{{ xs[1:] }}{{ xs[::-1] }}{{ xs[:-1] }}{{ xs[5] }}", R"({"xs": [1, 2, 3]})"),
            "13[2, 3][3, 2, 1][1, 2]");
  EXPECT_EQ(R("{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}", R"({"s": "héllo"})"), "hoélolléh");
  EXPECT_EQ(R("{{ d.a.b }}{{ d['a']['b'] }}{{ d.x.y }}|", R"({"d": {"a": {"b": 7}}})"), "77|");
  EXPECT_EQ(R("{{ -x }} {{ +x }} {{ - 2 }}", R"({"x": 3})"), "-3 3 -2");
}

TEST(JinjaTest, Tests) {
  EXPECT_EQ(R("{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ n is none }}{{ n is not none }}",
              R"({"x": 1, "n": null})"),
            "truefalsetruetruefalse");
  EXPECT_EQ(R("{{ 's' is string }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is boolean }}"),
            "truetruetruetruetrue");
  EXPECT_EQ(R("{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ 's' is iterable }}{{ d is iterable }}"
              "{{ d is sequence }}",
              R"({"d": {}, "l": []})"),
            "truefalsetruetruefalsetrue");
  EXPECT_EQ(R("{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}"),
            "truefalsetruetruetrue");
  EXPECT_EQ(R("{{ 2 is eq 2 }}{{ 'a' is equalto('a') }}{{ 9 is divisibleby 3 }}{{ 'ab' is lower }}{{ 'AB' is upper }}"),
            "truetruetruetruetrue");
  EXPECT_NE(Err("{{ 1 is frobnicated }}").find("Unknown test: frobnicated"), std::string::npos);
}

TEST(JinjaTest, ToJson) {
  const char* ctx = R"({"v": {"b": [1, 2.5, "x\"y", null, true], "a": {"é": "ü"}}})";
  EXPECT_EQ(R("{{ v | tojson }}", ctx), R"({"b": [1, 2.5, "x\"y", null, true], "a": {"é": "ü"}})");
  EXPECT_EQ(R("{{ v | tojson(indent=2) }}", ctx),
            "{\n  \"b\": [\n    1,\n    2.5,\n    \"x\\\"y\",\n    null,\n    true\n  ],\n  \"a\": {\n    \"é\": \"ü\"\n  }\n}");
  EXPECT_EQ(R("{{ v.a | tojson(ensure_ascii=true) }}", ctx), R"({"\u00e9": "\u00fc"})");
  EXPECT_EQ(R("{{ v | tojson(separators=(',', ':')) }}", ctx), R"({"b":[1,2.5,"x\"y",null,true],"a":{"é":"ü"}})");
  EXPECT_EQ(R("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
  EXPECT_EQ(R("{{ '\\n\\u0001</s>' | tojson }}"), R"("\n\u0001</s>")");
  EXPECT_EQ(R("{{ [] | tojson(indent=4) }}{{ {} | tojson(indent=4) }}{{ undefined_x | tojson }}"), "[]{}null");
  EXPECT_EQ(R("{{ 1.0 | tojson }} {{ 0.5 | tojson }}"), "1 0.5");
}

TEST(JinjaTest, StringFilters) {
  EXPECT_EQ(R("{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}"), "a b|a");
  EXPECT_EQ(R("{{ 'héllo' | length }} {{ 'ab' | count }} {{ 'abC' | upper }} {{ 'ÀB' | lower }}"), "5 2 ABC àb");
  EXPECT_EQ(R("{{ 'hello world-x' | title }} {{ 'hello' | capitalize }}"), "Hello World-X Hello");
  EXPECT_EQ(R("{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }}"), "a+b+c bba");
  EXPECT_EQ(R("{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}"), "a\n    b\n\n    c|  a\n  b");
  EXPECT_EQ(R("{{ '42abc' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '3.5' | float }} {{ 3.9 | int }}"),
            "42 0 7 3.5 3");
  EXPECT_EQ(R("{{ 'abc' | list }} {{ 'abc' | first }} {{ 'abc' | reverse }} {{ 'one two  three' | wordcount }}"),
            "[\"a\", \"b\", \"c\"] a cba 3");
  EXPECT_EQ(R("{{ '<a href=\"x\">&</a>' | e }}"), "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;");
  EXPECT_EQ(R("{{ ('{\"a\": [1, 2]}' | from_json).a[1] }}"), "2");
  EXPECT_EQ(R("{{ 5 | string }}{{ 1.0 | string }}{{ true | string }}{{ [1, 'a'] | string }}"), "51.0true[1, \"a\"]");
  EXPECT_EQ(R("{{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 2.1 | round(0, 'ceil') }}"), "3 2.57 3.0 3.0");
}

TEST(JinjaTest, ListFilters) {
  const char* ctx = R"({"people": [{"name": "Bo", "age": 30, "tag": "x"}, {"name": "al", "age": 25},
                                   {"name": "Cy", "age": 35, "tag": "y"}], "n": [3, 1, 2, 3]})";
  EXPECT_EQ(R("{{ n | length }} {{ n | first }} {{ n | last }} {{ n | sort }} {{ n | unique }} {{ n | reverse }}", ctx),
            "4 3 3 [1, 2, 3, 3] [3, 1, 2] [3, 2, 1, 3]");
  EXPECT_EQ(R("{{ n | sum }} {{ n | min }} {{ n | max }} {{ n | join('-') }} {{ n | join }}", ctx), "9 1 3 3-1-2-3 3123");
  EXPECT_EQ(R("{{ people | map(attribute='name') | join(', ') }}", ctx), "Bo, al, Cy");
  EXPECT_EQ(R("{{ people | map(attribute='tag', default='-') | join }}", ctx), "x-y");
  EXPECT_EQ(R("{{ people | map(attribute='name') | map('upper') | list }}", ctx), "[\"BO\", \"AL\", \"CY\"]");
  EXPECT_EQ(R("{{ people | sort(attribute='name') | map(attribute='name') | join }}", ctx), "alBoCy");
  EXPECT_EQ(R("{{ people | sort(attribute='age', reverse=true) | map(attribute='age') | join(',') }}", ctx), "35,30,25");
  EXPECT_EQ(R("{{ people | selectattr('tag') | map(attribute='name') | join }}", ctx), "BoCy");
  EXPECT_EQ(R("{{ people | selectattr('name', 'equalto', 'al') | map(attribute='age') | first }}", ctx), "25");
  EXPECT_EQ(R("{{ people | rejectattr('tag', 'defined') | map(attribute='name') | join }}", ctx), "al");
  EXPECT_EQ(R("{{ n | select('odd') | list }} {{ n | reject('eq', 3) | list }}", ctx), "[3, 1, 3] [1, 2]");
  EXPECT_EQ(R("{{ people | sum(attribute='age') }} {{ people | max(attribute='age') | tojson }}", ctx),
            "90 {\"name\": \"Cy\", \"age\": 35, \"tag\": \"y\"}");
  EXPECT_EQ(R("{{ [1, 2, 3, 4, 5] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }}"),
            "[[1, 2], [3, 4], [5]] [[1, 2], [3, 0]]");
  EXPECT_EQ(R("{{ [] | first }}|{{ [none, 1] | join(',') }}"), "|,1");
}

TEST(JinjaTest, DictFiltersAndMethods) {
  const char* ctx = R"({"d": {"b": 2, "A": 3, "c": 1}})";
  EXPECT_EQ(R("{{ d | items | list }}", ctx), R"([["b", 2], ["A", 3], ["c", 1]])");
  EXPECT_EQ(R("{{ d | dictsort }}", ctx), R"([["A", 3], ["b", 2], ["c", 1]])");
  EXPECT_EQ(R("{{ d | dictsort(by='value') }}", ctx), R"([["c", 1], ["b", 2], ["A", 3]])");
  EXPECT_EQ(R("{{ d | dictsort(true) }}", ctx), R"([["A", 3], ["b", 2], ["c", 1]])");
  EXPECT_EQ(R("{{ d.keys() | list }} {{ d.values() | list }} {{ d | length }}", ctx), R"(["b", "A", "c"] [2, 3, 1] 3)");
  EXPECT_EQ(R("{{ d.get('b') }} {{ d.get('z') }} {{ d.get('z', 9) }}", ctx), "2  9");
  EXPECT_EQ(R("{% set x = {0: 'zero', 16: 'big'} %}{{ x[16] }}{% for k, v in x | dictsort %}{{ k }}{% endfor %}"),
            "big016");
  EXPECT_EQ(R("{{ d | default('x') }} {{ nothing | default('x') }} {{ '' | default('x', true) }} {{ none | d('n') }}|",
              ctx),
            R"({"b": 2, "A": 3, "c": 1} x x |)");
}

TEST(JinjaTest, StringMethods) {
  EXPECT_EQ(R("[{{ '  a  '.strip() }}][{{ '\\n\\na \\n'.rstrip('\\n') }}][{{ 'xxa'.lstrip('x') }}]"), "[a][\n\na ][a]");
  EXPECT_EQ(R("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}"),
            R"(["a", "b", "", "c"] ["a", "b"] ["a", "b c"])");
  EXPECT_EQ(R("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'abc'.startswith('b') }}"),
            "truetruefalse");
  EXPECT_EQ(R("{{ 'a-b'.replace('-', '') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'ab'.upper() }} {{ 'AB'.lower() }}"),
            "ab baa AB ab");
  EXPECT_EQ(R("{{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'banana'.count('an') }} {{ 'x y'.title() }}"),
            "2 -1 2 X Y");
  EXPECT_EQ(R("{{ '<{}|{name}|{0}>'.format(1, name='n') }} {{ '{{}}'.format() }}"), "<1|n|1> {}");
  EXPECT_EQ(R("{{ 'a\\nb\\r\\nc'.splitlines() }} {{ ', '.join(['x', 'y']) }} {{ 'abc'.length }}"),
            R"(["a", "b", "c"] x, y 3)");
}

TEST(JinjaTest, ListMethods) {
  EXPECT_EQ(R("{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}{% set _ = ns.ids.append('b') %}"
              "{{ ns.ids.pop(0) }}{{ ns.ids }}{{ ns.ids | length }}"),
            R"(a["b"]1)");
  EXPECT_EQ(R("{% set l = [1, 3] %}{% set _ = l.insert(1, 2) %}{% set _ = l.extend([4]) %}{{ l }} {{ l.index(3) }}"),
            "[1, 2, 3, 4] 2");
  EXPECT_NE(Err("{{ [].pop() }}").find("pop from empty list"), std::string::npos);
}

TEST(JinjaTest, Globals) {
  EXPECT_EQ(R("{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(5, 0, -2) | list }}"),
            "[0, 1, 2] [1, 2, 3] [5, 3, 1]");
  EXPECT_EQ(R("{{ dict(a=1, b='x') }} {{ namespace(a=1) }}"), R"({"a": 1, "b": "x"} {"a": 1})");
  RenderOptions opt;
  opt.has_fixed_now = true;
  opt.fixed_now_unix = 1735734840;  // 2025-01-01 12:34 UTC
  setenv("TZ", "UTC", 1);
  tzset();
  auto r = Try("{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%B') }}", "{}", opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "2025-01-01 12:34 01 Jan 2025 January");
  auto e = Try("line1\n{{ raise_exception('Only user and assistant roles are supported!') }}");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(),
            "template error at line 2, column 4: raise_exception: Only user and assistant roles are supported!");
}

TEST(JinjaTest, UndefinedSemantics) {
  EXPECT_EQ(R("[{{ u }}][{{ u.a.b }}][{{ u['k'] }}][{{ u ~ 'x' }}][{{ u | default('d') }}][{{ u is defined }}]"),
            "[][][][x][d][false]");
  EXPECT_EQ(R("{{ u == none }} {{ not u }} {{ 'a' in u }}"), "true true false");
  EXPECT_NE(Err("{{ u + 1 }}").find("Cannot perform operation + on undefined values"), std::string::npos);
  EXPECT_NE(Err("{{ u | trim }}").find("Cannot apply filter \"trim\" to type: UndefinedValue"), std::string::npos);
  EXPECT_NE(Err("{{ u() }}").find("Cannot call something that is not a function: got UndefinedValue"),
            std::string::npos);
  EXPECT_NE(Err("{{ 'a' ~ none }}").find("on null values"), std::string::npos);
}

TEST(JinjaTest, JsonContextKeepsOrder) {
  // Insertion order, with array-index keys first (as a JavaScript object).
  EXPECT_EQ(R("{{ d | tojson }}", R"({"d": {"z": 1, "10": 2, "a": 3, "2": 4, "01": 5}})"),
            R"({"2": 4, "10": 2, "z": 1, "a": 3, "01": 5})");
  EXPECT_EQ(R("{{ x }} {{ x is integer }}", R"({"x": 2.0})"), "2 true");
}

TEST(JinjaTest, UnicodeCase) {
  EXPECT_EQ(R("{{ 'straße' | upper }} {{ 'ÉCOLE Ωμέγα' | lower }} {{ 'привет' | upper }}"),
            "STRASSE école ωμέγα ПРИВЕТ");
}

// ---- errors name the construct and where it is ----

TEST(JinjaErrorTest, UnsupportedConstructs) {
  EXPECT_EQ(Err("ok\n  {% include 'other.jinja' %}"),
            "template syntax error at line 2, column 6: unsupported statement 'include'");
  EXPECT_EQ(Err("{% extends 'base' %}"), "template syntax error at line 1, column 4: unsupported statement 'extends'");
  EXPECT_EQ(Err("{% block body %}{% endblock %}"),
            "template syntax error at line 1, column 4: unsupported statement 'block'");
  EXPECT_NE(Err("{% for x in y recursive %}{% endfor %}").find("unsupported construct 'recursive'"), std::string::npos);
  EXPECT_NE(Err("{% break %}").find("'break' outside of a for loop"), std::string::npos);
}

TEST(JinjaErrorTest, SyntaxErrors) {
  EXPECT_EQ(Err("{% if x %}never closed"),
            "template syntax error at line 1, column 1: 'if' block is never closed (expected '{% endif %}')");
  EXPECT_NE(Err("{{ 1 + }}").find("line 1, column 8"), std::string::npos);
  EXPECT_NE(Err("{{ 'unterminated }}").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(Err("{% endfor %}").find("unexpected 'endfor'"), std::string::npos);
  EXPECT_NE(Err("{{ a ! b }}").find("unexpected character '!'"), std::string::npos);
  EXPECT_NE(Err("{# never closed").find("missing end of comment tag"), std::string::npos);
}

TEST(JinjaErrorTest, RuntimeErrorsHavePositions) {
  EXPECT_EQ(Err("{{ x | frob }}", R"({"x": "s"})"),
            "template error at line 1, column 6: Unknown StringValue filter: frob");
  EXPECT_EQ(Err("a\n\n   {{ 1 / 0 }}"), "template error at line 3, column 9: division by zero");
}

// ---- limits: hostile templates fail cleanly ----

TEST(JinjaLimitsTest, DeepNestingIsRefused) {
  const std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_NE(Err("{{ " + parens + " }}").find("nesting deeper than"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 3000; ++i) ifs += "{% if true %}";
  EXPECT_NE(Err(ifs).find("nesting deeper than"), std::string::npos);
  std::string nots = "{{ " + std::string(1, ' ');
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_NE(Err(nots + "x }}").find("nesting deeper than"), std::string::npos);
}

TEST(JinjaLimitsTest, RunawayRecursionIsRefused) {
  EXPECT_NE(Err("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("runaway recursion"), std::string::npos);
}

TEST(JinjaLimitsTest, LoopsAndOutputAreBounded) {
  RenderOptions opt;
  opt.limits.max_loop_iterations = 1000;
  auto r = Try("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}", opt);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  opt = RenderOptions();
  opt.limits.max_output_bytes = 1000;
  r = Try("{% for i in range(1000) %}xx{% endfor %}", "{}", opt);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  r = Try("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "{}", opt);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(Err("{{ range(100000000) | length }}").find("exceeds the limit"), std::string::npos);
}

TEST(JinjaLimitsTest, SelfReferenceDoesNotLeakOrLoop) {
  // A namespace that holds itself: printing stops at the depth limit and the
  // render frees it (ASan's leak checker would object otherwise).
  EXPECT_NE(Err("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}").find("nested deeper"),
            std::string::npos);
  EXPECT_EQ(R("{% set l = [] %}{% set _ = l.append(l) %}{{ l | length }}"), "1");
}

// Real templates with random damage (cut, duplicated, spliced with tag
// fragments) must parse or fail cleanly, and render or fail cleanly.
TEST(JinjaLimitsTest, MutatedTemplatesNeverCrash) {
  KVS_REQUIRE_SHARED(dir, "templates");
  const ordered_json ctx = ordered_json::parse(R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": "u"}, {"role": "assistant", "content": "a", "tool_calls":
      [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "content": "r"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  const char* fragments[] = {"{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "(", ")", "[", "]", "'", "\"",
                             "|", ".", ",", " if ", " else ", " for ", " endfor ", " not ", "**", "\\"};
  std::mt19937 rng(1234);
  RenderOptions opt;
  opt.limits.max_loop_iterations = 100000;
  int parsed = 0, rendered = 0, total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string original = ss.str();
    if (original.empty()) continue;
    for (int k = 0; k < 25; ++k) {
      std::string s = original;
      for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
        const size_t at = rng() % (s.size() + 1);
        switch (rng() % 4) {
          case 0: s.resize(at); break;
          case 1: s.insert(at, fragments[rng() % (sizeof(fragments) / sizeof(fragments[0]))]); break;
          case 2: s.erase(at, rng() % 40); break;
          default: s.insert(at, s.substr(rng() % (s.size() + 1), rng() % 200)); break;
        }
      }
      ++total;
      auto t = Template::Parse(s);
      if (!t.ok()) continue;
      ++parsed;
      if (t->Render(ctx, opt).ok()) ++rendered;
    }
  }
  EXPECT_GT(total, 0);
  std::cout << total << " mutated templates: " << parsed << " parsed, " << rendered << " rendered\n";
}

TEST(JinjaThreadTest, OneTemplateRendersOnManyThreads) {
  auto t = Template::Parse("{% for m in messages %}{{ m.role }}:{{ m.content | trim }};{% endfor %}");
  ASSERT_TRUE(t.ok());
  const ordered_json ctx = ordered_json::parse(R"({"messages": [{"role": "user", "content": " hi "},
                                                               {"role": "assistant", "content": "yo"}]})");
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        auto r = t->Render(ctx);
        if (r.ok() && *r == "user:hi;assistant:yo;") ++good;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 8 * 200);
}

}  // namespace jinja_test
}  // namespace kvs::tmpl
