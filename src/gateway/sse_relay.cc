#include "gateway/sse_relay.h"

#include <string_view>

namespace kvs::gateway {

namespace {
bool NonEmptyString(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}
}  // namespace

bool CarriesToken(const nlohmann::json& j) {
  if (!j.is_object()) return true;
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) return true;
  auto it = j.find("choices");
  if (it == j.end() || !it->is_array()) return true;
  for (const auto& c : *it) {
    if (!c.is_object()) return true;
    if (auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) return true;
    if (NonEmptyString(c, "text")) return true;
    if (auto d = c.find("delta"); d != c.end() && d->is_object()) {
      if (NonEmptyString(*d, "content")) return true;
      if (d->contains("tool_calls") || d->contains("reasoning_content")) return true;
    }
  }
  return false;
}

void StripNullUsage(std::string* data) {
  static constexpr std::string_view kMember = ",\"usage\":null";
  if (size_t p = data->find(kMember); p != std::string::npos) data->erase(p, kMember.size());
}

}  // namespace kvs::gateway
