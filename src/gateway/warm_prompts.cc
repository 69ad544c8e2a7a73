#include "gateway/warm_prompts.h"

#include <nlohmann/json.hpp>

#include "base/line_file.h"
#include "gateway/cache_salt.h"
#include "gateway/keys.h"

namespace kvs::gateway {

namespace {

// Far more than a prefix cache holds; a bound on a mistaken file.
constexpr size_t kMaxWarmPrompts = 10000;

// The members of a replay's body after "model", serialized: the object's
// dump without its opening brace.
std::string WarmRest(nlohmann::ordered_json body) {
  body["max_tokens"] = 1;
  body["temperature"] = 0;
  std::string s = body.dump();
  return s.substr(1);
}

}  // namespace

StatusOr<std::vector<WarmPrompt>> LoadWarmPrompts(const std::string& path, bool tenant_scope) {
  std::vector<WarmPrompt> out;
  // Under the tenant scope a prompt warms one tenant's namespace, with the
  // cache_salt the proxy gives that tenant's requests.
  auto scoped = [&](nlohmann::ordered_json body, const std::string& tenant) {
    if (tenant_scope) body["cache_salt"] = TenantCacheSalt(tenant, "");
    return WarmRest(std::move(body));
  };
  KVS_RETURN_IF_ERROR(ForEachContentLine(path, [&](const std::string& line, size_t b, int line_no) -> Status {
    if (out.size() >= kMaxWarmPrompts) return InvalidArgument("{}: more than {} prompts", path, kMaxWarmPrompts);
    WarmPrompt p;
    p.line = line_no;
    if (line[b] != '{') {
      p.rest = scoped({{"prompt", line}}, kAnonymousTenant);
      out.push_back(std::move(p));
      return Status::Ok();
    }
    const auto j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return InvalidArgument("{}:{}: not a JSON object", path, line_no);
    std::string tenant = kAnonymousTenant;
    if (j.contains("tenant")) {
      if (!j["tenant"].is_string() || j["tenant"].get<std::string>().empty()) {
        return InvalidArgument("{}:{}: \"tenant\" must be a tenant's name", path, line_no);
      }
      tenant = j["tenant"].get<std::string>();
    }
    if (j.contains("prompt") && j["prompt"].is_string()) {
      p.rest = scoped({{"prompt", j["prompt"]}}, tenant);
    } else if (j.contains("messages") && j["messages"].is_array() && !j["messages"].empty()) {
      for (const auto& m : j["messages"]) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
          return InvalidArgument("{}:{}: each message needs a \"role\"", path, line_no);
        }
      }
      p.chat = true;
      p.rest = scoped({{"messages", j["messages"]}}, tenant);
    } else {
      return InvalidArgument("{}:{}: expected {{\"prompt\": string}} or {{\"messages\": [...]}}", path, line_no);
    }
    out.push_back(std::move(p));
    return Status::Ok();
  }));
  if (out.empty()) return InvalidArgument("{}: no prompts (every line is empty or a # comment)", path);
  return out;
}

std::string WarmRequestBody(const WarmPrompt& p, const std::string& model) {
  return "{\"model\":" + nlohmann::json(model).dump() + "," + p.rest;
}

}  // namespace kvs::gateway
