// KeyTable<T>: the typed configuration keys of a front end (`kvserve serve`,
// `kvserve gateway`) over its config struct T. Each key is declared once with
// its name ("server.port"), command-line alias ("port"), the member it sets,
// its range, choices or check, and its help; the table then parses YAML
// values and command-line strings into T, suggests a near key for a typo
// ("did you mean server.port?"), lists a section's keys and describes every
// key for --help and the shipped example files.
//
// Error messages name the key and what it accepts: "server.port: expected an
// integer in [0, 65535], got \"70000\"". A value that contains '@' (a URL
// with credentials) is never echoed.
// Thread-safety: a table is immutable once built; its methods are const and
// may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "frontend/key_info.h"

namespace kvs::frontend {

// A value as it came in, before it is checked against a key's type.
struct RawValue {
  enum Kind { kScalar, kQuoted, kList, kMap, kNull };
  Kind kind = kScalar;
  std::string text;                // kScalar, kQuoted
  std::vector<std::string> items;  // kList
  // A command-line value: a plain scalar.
  static RawValue Scalar(std::string_view text) { return RawValue{kScalar, std::string(text), {}}; }
  bool is_text() const { return kind == kScalar || kind == kQuoted; }
};

// A YAML node as a RawValue: a quoted scalar is kQuoted (never a number or a
// boolean), a list of scalars kList, a list of anything else kMap (reported
// as the wrong type), null or absent kNull.
RawValue FromYaml(const YAML::Node& n);
// For errors: "\"8000\"", "the quoted string \"8000\"", "a list", ...
std::string Describe(const RawValue& v);

// The YAML document in `text`; InvalidArgument with the line and column of a
// syntax error.
StatusOr<YAML::Node> ParseYaml(std::string_view text);
// The whole file; NotFound "cannot read configuration file".
StatusOr<std::string> ReadConfigFile(const std::string& path);

// Levenshtein distance.
size_t EditDistance(std::string_view a, std::string_view b);

// "header\n" then two lines per key: name and alias with the help, then
// type, allowed values and default.
std::string KeyHelp(std::string_view header, const std::vector<KeyInfo>& keys);

namespace key_detail {
// "name: expected E, got D"; a list or mapping given to a scalar key is
// "name: expected a single value (E), got a list".
Status Mismatch(std::string_view name, std::string_view expected, const RawValue& v, bool scalar_key = true);
std::optional<int64_t> ParseInt(const RawValue& v);  // a plain scalar, whole
std::optional<double> ParseNumber(const RawValue& v);  // a plain scalar, finite
std::optional<bool> ParseBool(const RawValue& v);    // true/yes/on, false/no/off, any case
std::string Lower(std::string s);
// A list, or a text split at commas (the command line); nullopt otherwise.
std::optional<std::vector<std::string>> ListItems(const RawValue& v);
std::string Join(const std::vector<std::string>& items);  // "a, b, c"
std::string NumberRange(double lo, bool lo_open, double hi);
// " (did you mean NAME?)" for the candidate nearest `typed`, or "".
// candidates: (spelling, the name to suggest); a spelling "section.key" is
// also compared by its part after the first dot.
std::string SuggestAmong(std::string_view typed,
                         const std::vector<std::pair<std::string_view, std::string_view>>& candidates);
}  // namespace key_detail

template <class T>
struct ConfigKey {
  std::string name;   // "server.port", or "max_context" in a table of pool keys
  std::string alias;  // without "--"; "" if none
  std::string type;   // as in KeyInfo
  std::string allowed;
  std::string help;
  std::function<Status(T&, const RawValue&)> set;  // checks, then sets the member
  std::function<nlohmann::json(const T&)> get;
};

template <class T>
class KeyTable {
 public:
  using Key = ConfigKey<T>;
  template <class V>
  using Ref = V& (*)(T&);
  // "" when the value is acceptable, else what is expected.
  using IntCheck = std::function<std::string(int64_t)>;
  using TextCheck = std::function<std::string(const std::string&)>;

  // An integer in [lo, hi]; `check` refines it ("must be a power of two"),
  // `allowed` replaces "[lo, hi]" in the help and errors.
  static Key Int(std::string name, std::string alias, Ref<int64_t> ref, int64_t lo, int64_t hi, std::string help,
                 IntCheck check = nullptr, std::string allowed = "") {
    Key k{std::move(name), std::move(alias), "integer", allowed.empty() ? fmt::format("[{}, {}]", lo, hi) : allowed,
          std::move(help), nullptr, Getter(ref)};
    k.set = [name = k.name, expected = "an integer in " + k.allowed, ref, lo, hi, check](T& c, const RawValue& v) {
      const std::optional<int64_t> x = key_detail::ParseInt(v);
      if (!x || *x < lo || *x > hi) return key_detail::Mismatch(name, expected, v);
      if (check) {
        if (std::string why = check(*x); !why.empty()) return InvalidArgument("{}: {}, got {}", name, why, *x);
      }
      ref(c) = *x;
      return Status::Ok();
    };
    return k;
  }

  // A number in [lo, hi], or (lo, hi] when lo_open.
  static Key Number(std::string name, std::string alias, Ref<double> ref, double lo, bool lo_open, double hi,
                    std::string help) {
    Key k{std::move(name), std::move(alias), "number", key_detail::NumberRange(lo, lo_open, hi), std::move(help),
          nullptr, Getter(ref)};
    k.set = [name = k.name, expected = "a number in " + k.allowed, ref, lo, lo_open, hi](T& c, const RawValue& v) {
      const std::optional<double> x = key_detail::ParseNumber(v);
      if (!x || *x < lo || *x > hi || (lo_open && *x == lo)) return key_detail::Mismatch(name, expected, v);
      ref(c) = *x;
      return Status::Ok();
    };
    return k;
  }

  static Key Bool(std::string name, std::string alias, Ref<bool> ref, std::string help) {
    Key k{std::move(name), std::move(alias), "boolean", "true, false", std::move(help), nullptr, Getter(ref)};
    k.set = [name = k.name, ref](T& c, const RawValue& v) {
      const std::optional<bool> x = key_detail::ParseBool(v);
      if (!x) return key_detail::Mismatch(name, "true or false", v);
      ref(c) = *x;
      return Status::Ok();
    };
    return k;
  }

  // Any string (quoted or not) that `check` accepts.
  static Key String(std::string name, std::string alias, Ref<std::string> ref, std::string allowed, std::string help,
                    TextCheck check = nullptr) {
    Key k{std::move(name), std::move(alias), "string", std::move(allowed), std::move(help), nullptr, Getter(ref)};
    k.set = [name = k.name, ref, check](T& c, const RawValue& v) {
      if (!v.is_text()) return key_detail::Mismatch(name, "a string", v);
      if (check) {
        if (std::string why = check(v.text); !why.empty()) return key_detail::Mismatch(name, why, v);
      }
      ref(c) = v.text;
      return Status::Ok();
    };
    return k;
  }

  // One of `choices` (matched in any case, stored lower-case).
  static Key Enum(std::string name, std::string alias, Ref<std::string> ref, std::vector<std::string> choices,
                  std::string help) {
    Key k{std::move(name), std::move(alias), "one of", key_detail::Join(choices), std::move(help), nullptr,
          Getter(ref)};
    k.set = [name = k.name, expected = "one of: " + k.allowed, ref, choices](T& c, const RawValue& v) {
      if (v.is_text()) {
        std::string t = key_detail::Lower(v.text);
        for (const std::string& choice : choices) {
          if (t == choice) {
            ref(c) = std::move(t);
            return Status::Ok();
          }
        }
      }
      return key_detail::Mismatch(name, expected, v);
    };
    return k;
  }

  // Non-empty strings: a YAML list, or comma-separated on the command line.
  static Key List(std::string name, std::string alias, Ref<std::vector<std::string>> ref, std::string help) {
    Key k{std::move(name), std::move(alias), "list of strings", "non-empty strings", std::move(help), nullptr,
          Getter(ref)};
    k.set = [name = k.name, ref](T& c, const RawValue& v) {
      std::optional<std::vector<std::string>> items = key_detail::ListItems(v);
      if (!items) return key_detail::Mismatch(name, "a list of strings", v, /*scalar_key=*/false);
      for (size_t i = 0; i < items->size(); ++i) {
        if ((*items)[i].empty()) return InvalidArgument("{}: item {} is empty; expected non-empty strings", name, i);
      }
      ref(c) = std::move(*items);
      return Status::Ok();
    };
    return k;
  }

  explicit KeyTable(std::vector<Key> keys) : keys_(std::move(keys)) {}

  const std::vector<Key>& keys() const { return keys_; }

  // By name or alias (the command line).
  const Key* Find(std::string_view name_or_alias) const {
    for (const Key& k : keys_) {
      if (k.name == name_or_alias || (!k.alias.empty() && k.alias == name_or_alias)) return &k;
    }
    return nullptr;
  }
  // By name only (a YAML file).
  const Key* FindName(std::string_view name) const {
    for (const Key& k : keys_) {
      if (k.name == name) return &k;
    }
    return nullptr;
  }

  // " (did you mean server.port?)" for a name or alias near `typed`, or "".
  std::string Suggest(std::string_view typed) const {
    std::vector<std::pair<std::string_view, std::string_view>> candidates;
    for (const Key& k : keys_) {
      candidates.emplace_back(k.name, k.name);
      if (!k.alias.empty()) candidates.emplace_back(k.alias, k.name);
    }
    return key_detail::SuggestAmong(typed, candidates);
  }

  // The names that start with `prefix`, without it: "host, port, ..." for
  // the prefix "server.".
  std::string Names(std::string_view prefix) const {
    std::string out;
    for (const Key& k : keys_) {
      if (k.name.size() > prefix.size() && std::string_view(k.name).substr(0, prefix.size()) == prefix) {
        out += (out.empty() ? "" : ", ") + k.name.substr(prefix.size());
      }
    }
    return out;
  }

  // The mapping `body` of YAML section `section` (keys "section.key") over
  // *cfg. A key with an empty (null) value keeps its value.
  Status LoadSection(const std::string& section, const YAML::Node& body, T* cfg) const {
    if (body.IsNull()) return Status::Ok();
    const std::string prefix = section + ".";
    if (!body.IsMap()) return InvalidArgument("{}: expected a mapping of keys ({})", section, Names(prefix));
    std::set<std::string> seen;
    for (const auto& kv : body) {
      const std::string name = prefix + kv.first.Scalar();
      const Key* k = FindName(name);
      if (!k && kv.second.IsMap() && HasPrefix(name + ".")) {
        // A sub-section ("kv_cache: {disk: {path: ...}}" for kv_cache.disk.path).
        if (!seen.insert(name).second) return InvalidArgument("key \"{}\" appears twice", name);
        KVS_RETURN_IF_ERROR(LoadSection(name, kv.second, cfg));
        continue;
      }
      if (!k) {
        return InvalidArgument("unknown key \"{}\"{}; keys of {} are: {}", name, Suggest(name), section,
                               Names(prefix));
      }
      if (!seen.insert(name).second) return InvalidArgument("key \"{}\" appears twice", name);
      const RawValue v = FromYaml(kv.second);
      if (v.kind == RawValue::kNull) continue;
      KVS_RETURN_IF_ERROR(k->set(*cfg, v));
    }
    return Status::Ok();
  }

  // "unknown option --NAME (did you mean ...?); HINT".
  Status UnknownOption(std::string_view name, std::string_view hint) const {
    return InvalidArgument("unknown option --{}{}; {}", name, Suggest(name), hint);
  }
  // One command-line override by name or alias.
  Status SetOption(T* cfg, std::string_view name, std::string_view value, std::string_view hint) const {
    const Key* k = Find(name);
    if (!k) return UnknownOption(name, hint);
    return k->set(*cfg, RawValue::Scalar(value));
  }

  // Every key, its default read from `defaults`; `prefix` goes before each
  // name ("pools[]."); `options`: whether they can be set on the command line.
  std::vector<KeyInfo> Infos(const T& defaults, std::string_view prefix = "", bool options = true) const {
    std::vector<KeyInfo> out;
    for (const Key& k : keys_) {
      out.push_back({std::string(prefix) + k.name, k.alias.empty() ? "" : "--" + k.alias, k.type, k.allowed,
                     k.get(defaults).dump(), k.help, options});
    }
    return out;
  }

  // {"section": {"key": value}} for names "section.key"; {"key": value} for
  // names without a dot.
  nlohmann::json ToJson(const T& cfg) const {
    nlohmann::json j = nlohmann::json::object();
    for (const Key& k : keys_) {
      // "a.b.c" is {"a": {"b": {"c": value}}}.
      nlohmann::json* at = &j;
      size_t from = 0;
      for (size_t dot; (dot = k.name.find('.', from)) != std::string::npos; from = dot + 1) {
        at = &(*at)[k.name.substr(from, dot - from)];
      }
      (*at)[k.name.substr(from)] = k.get(cfg);
    }
    return j;
  }

  // Whether some key's name starts with `prefix`.
  bool HasPrefix(const std::string& prefix) const {
    for (const Key& k : keys_) {
      if (k.name.starts_with(prefix)) return true;
    }
    return false;
  }

 private:
  template <class V>
  static std::function<nlohmann::json(const T&)> Getter(Ref<V> ref) {
    // The reference accessors take T&: reading through them does not write.
    return [ref](const T& c) { return nlohmann::json(ref(const_cast<T&>(c))); };
  }

  std::vector<Key> keys_;
};

}  // namespace kvs::frontend
