#include "grammar/test_util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/test_util.h"

namespace kvs::grammar::testing {

std::shared_ptr<const Vocabulary> ByteVocabulary() {
  static const std::shared_ptr<const Vocabulary> v = VocabularyOf(ByteTokens());
  return v;
}

std::vector<std::string> ByteTokens() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  return bytes;
}

std::shared_ptr<const Vocabulary> VocabularyOf(const std::vector<std::string>& tokens) {
  std::vector<std::string> bytes = tokens;
  std::vector<Vocabulary::Kind> kinds(bytes.size(), Vocabulary::Kind::kText);
  bytes.push_back("</s>");
  kinds.push_back(Vocabulary::Kind::kStop);
  return *Vocabulary::FromTokens(std::move(bytes), std::move(kinds));
}

std::shared_ptr<const CompiledGrammar> CompileOrDie(std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab) {
  auto g = CompiledGrammar::FromGbnf(gbnf, std::move(vocab));
  if (!g.ok()) {
    ADD_FAILURE() << "grammar does not compile: " << g.status().ToString() << "\n" << gbnf;
    return nullptr;
  }
  return *g;
}

bool Matches(std::string_view gbnf, std::string_view text) {
  auto g = CompileOrDie(gbnf, ByteVocabulary());
  if (g == nullptr) return false;
  GrammarMatcher m(g);
  if (!m.AcceptBytes(text).ok()) return false;
  return m.CanEnd();
}

std::string CompileError(std::string_view gbnf) {
  auto g = CompiledGrammar::FromGbnf(gbnf, ByteVocabulary());
  return g.ok() ? std::string() : g.status().message();
}

WalkResult RandomWalk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng, int32_t budget,
                      int32_t max_steps) {
  WalkResult r;
  GrammarMatcher m(g);
  const Vocabulary& v = g->vocabulary();
  std::vector<uint32_t> mask(v.mask_words());
  std::vector<int32_t> allowed;
  for (int32_t step = 0; step < max_steps; ++step) {
    const Status st = m.FillNextTokenMask(mask);
    if (!st.ok()) {
      ADD_FAILURE() << "mask failed after '" << r.text << "': " << st.ToString();
      return r;
    }
    allowed.clear();
    for (int32_t id = 0; id < v.size(); ++id) {
      if (MaskTest(mask, id)) allowed.push_back(id);
    }
    if (allowed.empty()) {
      ADD_FAILURE() << "no allowed token after '" << r.text << "'";
      return r;
    }
    int32_t pick = allowed[rng() % allowed.size()];
    if (step >= budget) {
      // Steer: the candidate whose state is closest to an end.
      if (m.CanEnd() && !v.stop_ids().empty()) {
        pick = v.stop_ids()[0];
      } else {
        std::vector<int32_t> cands;
        for (int32_t id : allowed) {
          if (v.kind(id) == Vocabulary::Kind::kText && v.token_bytes(id).size() == 1) cands.push_back(id);
        }
        for (int k = 0; k < 32; ++k) cands.push_back(allowed[rng() % allowed.size()]);
        int32_t best = INT32_MAX;
        for (int32_t id : cands) {
          if (v.kind(id) == Vocabulary::Kind::kStop) {
            pick = id;
            break;
          }
          GrammarMatcher probe = m.Clone();
          if (!probe.AcceptToken(id).ok()) {
            ADD_FAILURE() << "allowed token " << id << " rejected by a probe";
            continue;
          }
          const int32_t d = probe.MinCompletionBytes();
          if (d < best || (d == best && rng() % 2 == 0)) {
            best = d;
            pick = id;
          }
        }
      }
    }
    const Status acc = m.AcceptToken(pick);
    if (!acc.ok()) {
      ADD_FAILURE() << "allowed token " << pick << " ('" << v.token_bytes(pick) << "') rejected after '" << r.text
                    << "': " << acc.ToString();
      return r;
    }
    r.tokens.push_back(pick);
    if (v.kind(pick) == Vocabulary::Kind::kStop) {
      r.finished = true;
      return r;
    }
    r.text += v.token_bytes(pick);
  }
  return r;
}

std::string AjvMissing() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(kvs::testing::SourceDir()) / "tests" / "oracles";
  if (!fs::exists(dir / "node_modules" / "ajv" / "package.json") ||
      !fs::exists(dir / "node_modules" / "ajv-formats" / "package.json")) {
    return "tests/oracles/node_modules lacks ajv/ajv-formats (run scripts/setup.sh)";
  }
  if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not installed";
  return "";
}

nlohmann::ordered_json RunAjv(const nlohmann::ordered_json& jobs) {
  namespace fs = std::filesystem;
  const fs::path tmp = kvs::testing::TempDir("ajv_oracle");
  const fs::path in = tmp / "jobs.json", out = tmp / "out.json";
  std::ofstream(in) << jobs.dump();
  const std::string cmd = "node '" + (fs::path(kvs::testing::SourceDir()) / "tests/oracles/validate_json.mjs").string() +
                          "' '" + in.string() + "' > '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  fs::remove_all(tmp);
  return nlohmann::ordered_json::parse(ss.str(), nullptr, false);
}

}  // namespace kvs::grammar::testing
