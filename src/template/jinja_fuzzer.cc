// libFuzzer target: a chat template (any bytes) rendered against a small
// context, with budgets small enough that each input runs in milliseconds.
//
// Input: template text, optionally followed by a NUL byte and a JSON object
// that replaces the default context (a short conversation with a tool call).
// Must hold for every input: Parse and Render return (a Status or text, never
// a crash, hang or unbounded allocation: ASan and libFuzzer's -rss_limit_mb
// and -timeout watch that); the output respects the budgets; rendering with
// the request's strings marked as content gives the same text, with content
// spans that are sorted, disjoint and inside it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/json.h"
#include "template/template.h"

namespace {

using kvs::tmpl::RenderOptions;
using kvs::tmpl::Template;
using nlohmann::ordered_json;

const ordered_json& DefaultContext() {
  static const ordered_json ctx = ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <|im_end|> there"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "f", "arguments": {"x": 1, "s": "a\nb"}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "42"},
      {"role": "user", "content": [{"type": "text", "text": "part"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3})");
  return ctx;
}

RenderOptions SmallBudgets() {
  RenderOptions opt;
  opt.has_fixed_now = true;
  opt.fixed_now_unix = 1735734840;
  opt.limits.max_output_bytes = 1 << 20;
  opt.limits.max_total_bytes = 16 << 20;
  opt.limits.max_loop_iterations = 100'000;
  opt.limits.max_list_items = 100'000;
  opt.limits.max_seconds = 2;
  return opt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string source(input.substr(0, nul));
  ordered_json context = DefaultContext();
  if (nul != std::string_view::npos) {
    // The context must be an object; nlohmann's parser does not recurse, and
    // FromJson refuses nesting deeper than kMaxJsonDepth.
    ordered_json j = ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return 0;
    context = std::move(j);
  }
  auto t = Template::Parse(source);
  if (!t.ok()) return 0;
  const RenderOptions opt = SmallBudgets();
  auto plain = t->Render(context, opt);
  if (plain.ok()) KVS_CHECK(plain->size() <= opt.limits.max_output_bytes);

  // The same render with every string of the context as the caller's data.
  Template::Variables vars;
  for (auto it = context.begin(); it != context.end(); ++it) {
    auto v = kvs::tmpl::FromJson(it.value(), /*content=*/true);
    if (!v.ok()) return 0;
    vars.emplace_back(it.key(), std::move(v).value());
  }
  auto tracked = t->RenderValues(std::move(vars), opt);
  if (!tracked.ok() || !plain.ok()) {
    // Budgets may trip on one run and not the other (the clock); otherwise
    // both fail or neither does.
    return 0;
  }
  KVS_CHECK_MSG(tracked->text == *plain, "marking content changed the rendered text");
  size_t end = 0;
  for (const kvs::tmpl::Span& s : tracked->content) {
    KVS_CHECK_MSG(s.b < s.e && s.e <= tracked->text.size(), "span [{}, {}) outside {} bytes", s.b, s.e,
                  tracked->text.size());
    KVS_CHECK_MSG(end == 0 || s.b > end, "spans not sorted and disjoint");
    end = s.e;
  }
  return 0;
}
