#include "bench/dataset.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kvs::bench {

namespace {

using Json = nlohmann::json;

std::string Str(const Json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k) && j[k].is_string()) return j[k].get<std::string>();
  }
  return "";
}

std::optional<double> Num(const Json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k) && j[k].is_number()) return j[k].get<double>();
  }
  return std::nullopt;
}

bool IsUser(const std::string& role) { return role == "human" || role == "user"; }
bool IsAssistant(const std::string& role) { return role == "gpt" || role == "assistant" || role == "chatgpt"; }

// One object of the file; nullopt when it has nothing to send.
std::optional<DatasetEntry> EntryOf(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  DatasetEntry e;
  const Json* turns = nullptr;
  if (j.contains("conversations") && j["conversations"].is_array()) turns = &j["conversations"];
  if (j.contains("messages") && j["messages"].is_array()) turns = &j["messages"];
  if (turns) {
    for (size_t i = 0; i < turns->size(); ++i) {
      const Json& t = (*turns)[i];
      if (!t.is_object()) continue;
      const std::string role = Str(t, {"from", "role"});
      const std::string text = Str(t, {"value", "content"});
      if (e.prompt.empty()) {
        if (IsUser(role) && !text.empty()) e.prompt = text;
      } else {
        if (IsAssistant(role)) e.reply = text;
        break;
      }
    }
  } else {
    e.prompt = Str(j, {"prompt"});
  }
  e.timestamp = Num(j, {"timestamp"});
  if (auto n = Num(j, {"input_length", "input_tokens"}); n && *n >= 1) e.input_length = static_cast<int64_t>(*n);
  if (auto n = Num(j, {"output_length", "output_tokens"}); n && *n >= 1) e.output_length = static_cast<int64_t>(*n);
  if (e.prompt.empty() && !e.input_length) return std::nullopt;
  return e;
}

}  // namespace

StatusOr<Dataset> ParseDataset(const std::string& text, const std::string& name) {
  Dataset d;
  d.path = name;
  std::vector<Json> objects;
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    Json all = Json::parse(text, nullptr, false);
    if (all.is_discarded() || !all.is_array()) return InvalidArgument("{}: not a JSON array of objects", name);
    for (Json& o : all) objects.push_back(std::move(o));
  } else {
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Json o = Json::parse(line, nullptr, false);
      if (o.is_discarded()) return InvalidArgument("{}:{}: not a JSON object (JSON Lines: one per line)", name, n);
      objects.push_back(std::move(o));
    }
  }
  bool all_timed = true;
  for (const Json& o : objects) {
    auto e = EntryOf(o);
    if (!e) {
      ++d.skipped;
      continue;
    }
    all_timed = all_timed && e->timestamp.has_value();
    d.entries.push_back(std::move(*e));
  }
  if (d.entries.empty()) {
    return InvalidArgument(
        "{}: no usable entry in {} objects: expected ShareGPT conversations (a human turn), OpenAI messages (a user "
        "message), or trace rows with input_length",
        name, objects.size());
  }
  d.timed = all_timed;
  if (d.timed) {
    for (size_t i = 1; i < d.entries.size(); ++i) {
      if (*d.entries[i].timestamp < *d.entries[i - 1].timestamp) {
        return InvalidArgument("{}: trace timestamps must not decrease (entry {}: {} after {})", name, i,
                               *d.entries[i].timestamp, *d.entries[i - 1].timestamp);
      }
    }
  }
  return d;
}

StatusOr<Dataset> LoadDataset(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read the dataset {}", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseDataset(ss.str(), path);
}

}  // namespace kvs::bench
