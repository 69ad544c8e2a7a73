// Test helpers for src/bench: a word-counting token counter, an endpoint on
// the fake server, and a strict little XML well-formedness check for
// the SVG the reports embed (elements nest and close, attributes are
// quoted, entities are the predefined or numeric ones, no raw '<' or '&').
// The end-to-end tests also parse every SVG with Python's xml.etree, an
// independent parser.
#pragma once

#include <cctype>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "bench/endpoint.h"
#include "bench/testing/fake_openai_server.h"

namespace kvs::bench::testing {

// A token counter for prompt-building tests: one token per
// whitespace-separated word, plus BOS; a chat adds 6.
class WordCounter : public TokenCounter {
 public:
  StatusOr<int64_t> CountPrompt(const std::string& text) override {
    WordStream w;
    w.Append(text);
    return static_cast<int64_t>(w.words.size()) + 1;
  }
  StatusOr<int64_t> CountChat(const std::vector<ChatMessage>& m) override {
    int64_t n = 6;
    for (const auto& x : m) n += *CountPrompt(x.content) - 1;
    return n;
  }
  std::string Describe() const override { return "words"; }
};

// An endpoint on the fake server (url + suffix), discovered.
inline std::unique_ptr<Endpoint> Connect(const FakeOpenAiServer& s, const std::string& suffix = "") {
  EndpointOptions o;
  o.url = s.url() + suffix;
  auto ep = Endpoint::Create(o);
  EXPECT_TRUE(ep.ok());
  auto info = (*ep)->Discover();
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  return std::move(*ep);
}

// "" when well-formed, else what is wrong and where.
inline std::string XmlProblem(std::string_view s) {
  std::vector<std::string> stack;
  size_t i = 0;
  auto at = [&](size_t p) { return " at byte " + std::to_string(p); };
  auto check_entity = [&](size_t p, size_t* end) -> bool {
    const size_t semi = s.find(';', p);
    if (semi == std::string_view::npos || semi - p > 10) return false;
    std::string_view name = s.substr(p + 1, semi - p - 1);
    *end = semi + 1;
    if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") return true;
    if (name.size() >= 2 && name[0] == '#') {
      for (size_t k = (name[1] == 'x' ? 2 : 1); k < name.size(); ++k) {
        if (!std::isxdigit(static_cast<unsigned char>(name[k]))) return false;
      }
      return true;
    }
    return false;
  };
  bool root_seen = false;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '&') {
      size_t end = 0;
      if (!check_entity(i, &end)) return "bad entity" + at(i);
      i = end;
      continue;
    }
    if (c != '<') {
      ++i;
      continue;
    }
    if (s.substr(i, 4) == "<!--") {
      const size_t e = s.find("-->", i);
      if (e == std::string_view::npos) return "unclosed comment" + at(i);
      i = e + 3;
      continue;
    }
    if (s.substr(i, 2) == "<?") {
      const size_t e = s.find("?>", i);
      if (e == std::string_view::npos) return "unclosed processing instruction" + at(i);
      i = e + 2;
      continue;
    }
    if (s.substr(i, 2) == "</") {
      const size_t e = s.find('>', i);
      if (e == std::string_view::npos) return "unclosed end tag" + at(i);
      std::string name(s.substr(i + 2, e - i - 2));
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
      if (stack.empty() || stack.back() != name) return "end tag </" + name + "> does not match" + at(i);
      stack.pop_back();
      i = e + 1;
      continue;
    }
    // Start tag.
    size_t j = i + 1;
    while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == ':' || s[j] == '-' ||
                            s[j] == '_')) {
      ++j;
    }
    if (j == i + 1) return "'<' that starts no tag" + at(i);
    std::string name(s.substr(i + 1, j - i - 1));
    if (stack.empty() && root_seen) return "second root element <" + name + ">" + at(i);
    root_seen = true;
    for (;;) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j >= s.size()) return "unclosed start tag" + at(i);
      if (s[j] == '>') {
        stack.push_back(name);
        ++j;
        break;
      }
      if (s.substr(j, 2) == "/>") {
        j += 2;
        break;
      }
      const size_t a0 = j;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == ':' || s[j] == '-' ||
                              s[j] == '_')) {
        ++j;
      }
      if (j == a0) return "bad attribute in <" + name + ">" + at(j);
      if (j >= s.size() || s[j] != '=') return "attribute without value in <" + name + ">" + at(j);
      ++j;
      if (j >= s.size() || (s[j] != '"' && s[j] != '\'')) return "unquoted attribute in <" + name + ">" + at(j);
      const char q = s[j++];
      while (j < s.size() && s[j] != q) {
        if (s[j] == '<') return "'<' inside an attribute" + at(j);
        if (s[j] == '&') {
          size_t end = 0;
          if (!check_entity(j, &end)) return "bad entity in an attribute" + at(j);
          j = end;
          continue;
        }
        ++j;
      }
      if (j >= s.size()) return "unclosed attribute" + at(a0);
      ++j;
    }
    i = j;
  }
  if (!stack.empty()) return "unclosed element <" + stack.back() + ">";
  if (!root_seen) return "no element";
  return "";
}

}  // namespace kvs::bench::testing
