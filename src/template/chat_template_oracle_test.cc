// Renders every real chat template in ../shared/templates with every
// conversation in tests/chat_conversations, both with kvserve's interpreter
// and with @huggingface/jinja (tests/oracles/render_template.mjs), and
// requires byte-identical prompts (also from RenderTracked, the path that
// tracks which bytes came from the request).
//
// When the oracle raises, kvserve must raise too, except where the oracle
// cannot render a Jinja2 construct at all: then the job is compared with the
// oracle's extended mode (render_template.mjs adds the few missing Jinja2
// builtins), or, for constructs listed in kOracleGaps, only counted.
// Skips cleanly when ../shared, node or the npm oracle is absent.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/test_util.h"
#include "template/chat_template.h"

namespace kvs::tmpl {
namespace chat_template_oracle_test {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// 2025-01-01 12:34:00 UTC: strftime_now() in both renderers.
constexpr int64_t kNowUnix = 1735734840;

// Oracle errors that mean "this library cannot express the construct",
// where Jinja2 (and kvserve) render.
const char* const kOracleGaps[] = {
    "Object keys must be strings",  // {0: 'a'} integer dict keys
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Where two renders first differ, with a little context of each.
std::string Diff(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto excerpt = [&](const std::string& s) {
    const size_t b = i > 60 ? i - 60 : 0;
    return ordered_json(s.substr(b, 120)).dump();
  };
  std::ostringstream os;
  os << "first difference at byte " << i << " (oracle " << want.size() << " bytes, kvserve " << got.size()
     << " bytes)\n  oracle:  " << excerpt(want) << "\n  kvserve: " << excerpt(got);
  return os.str();
}

struct Conversation {
  std::string name;
  ChatRequest request;
};

std::vector<Conversation> LoadConversations() {
  std::vector<Conversation> out;
  const fs::path dir = fs::path(testing::SourceDir()) / "tests" / "chat_conversations";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    ordered_json j = ordered_json::parse(ReadFile(f));
    Conversation c;
    c.name = f.filename().string();
    c.request.messages = j.at("messages");
    c.request.tools = j.value("tools", ordered_json());
    c.request.add_generation_prompt = j.value("add_generation_prompt", false);
    c.request.bos_token = j.value("bos_token", std::string("<s>"));
    c.request.eos_token = j.value("eos_token", std::string("</s>"));
    if (j.contains("extra")) c.request.extra = j.at("extra");
    c.request.now_unix = kNowUnix;
    out.push_back(std::move(c));
  }
  return out;
}

TEST(ChatTemplateOracleTest, MatchesHuggingFaceJinjaOnRealTemplates) {
  KVS_REQUIRE_SHARED(templates_dir, "templates");
  const fs::path oracle_dir = fs::path(testing::SourceDir()) / "tests" / "oracles";
  if (!fs::exists(oracle_dir / "node_modules" / "@huggingface" / "jinja" / "package.json")) {
    GTEST_SKIP() << "tests/oracles/node_modules is absent (run scripts/setup.sh); skipping";
  }
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed; skipping";

  // Both renderers read local time: pin the zone.
  setenv("TZ", "UTC", 1);
  tzset();

  std::vector<fs::path> templates;
  for (const auto& e : fs::directory_iterator(templates_dir)) {
    if (e.path().extension() == ".jinja") templates.push_back(e.path());
  }
  std::sort(templates.begin(), templates.end());
  const std::vector<Conversation> conversations = LoadConversations();
  ASSERT_FALSE(templates.empty());
  ASSERT_FALSE(conversations.empty());

  struct Job {
    size_t t, c;
    ordered_json context;
  };
  std::vector<Job> jobs;
  ordered_json spec = {{"now_ms", kNowUnix * 1000}, {"jobs", ordered_json::array()}};
  for (size_t t = 0; t < templates.size(); ++t) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      auto ctx = ChatTemplate::BuildContext(conversations[c].request);
      ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
      spec["jobs"].push_back({{"template", fs::absolute(templates[t]).string()}, {"context", *ctx}});
      jobs.push_back(Job{t, c, *ctx});
    }
  }
  const fs::path tmp = testing::TempDir("chat_template_oracle");
  const fs::path spec_path = tmp / "jobs.json", out_path = tmp / "results.json", err_path = tmp / "stderr.txt";
  std::ofstream(spec_path) << spec.dump();
  const std::string cmd = "node '" + (oracle_dir / "render_template.mjs").string() + "' '" + spec_path.string() +
                          "' > '" + out_path.string() + "' 2> '" + err_path.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "oracle failed: " << ReadFile(err_path);
  const ordered_json results = ordered_json::parse(ReadFile(out_path));
  ASSERT_EQ(results.size(), jobs.size());

  std::vector<std::optional<StatusOr<ChatTemplate>>> parsed(templates.size());
  int matched = 0, matched_ext = 0, both_raised = 0, oracle_gap = 0;
  std::map<std::string, int> gap_templates;
  // KVSERVE_ORACLE_VERBOSE=1 lists the pairs where both renderers raised.
  const bool verbose = std::getenv("KVSERVE_ORACLE_VERBOSE") != nullptr;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    const std::string label = templates[job.t].filename().string() + " x " + conversations[job.c].name;
    auto& tmpl = parsed[job.t];
    if (!tmpl) tmpl = ChatTemplate::Parse(ReadFile(templates[job.t]));
    StatusOr<std::string> ours = tmpl->ok() ? (*tmpl)->RenderContext(job.context, kNowUnix)
                                            : StatusOr<std::string>(tmpl->status());
    if (ours.ok()) {
      // Tracking which bytes came from the request changes nothing in the text.
      ChatRequest request = conversations[job.c].request;
      request.now_unix = kNowUnix;
      auto tracked = (*tmpl)->RenderTracked(request);
      EXPECT_TRUE(tracked.ok() && tracked->text == *ours)
          << label << ": RenderTracked " << (tracked.ok() ? "renders other text" : tracked.status().ToString());
    }
    const ordered_json& r = results[i];
    if (r.at("ok").get<bool>()) {
      const std::string want = r.at("output").get<std::string>();
      if (!ours.ok()) {
        ADD_FAILURE() << label << ": oracle rendered, kvserve failed: " << ours.status().ToString();
      } else if (*ours != want) {
        ADD_FAILURE() << label << ": " << Diff(want, *ours);
      } else {
        ++matched;
      }
      continue;
    }
    const std::string oracle_error = r.at("error").get<std::string>();
    const ordered_json& ext = r.at("ext");
    if (ext.at("ok").get<bool>()) {
      const std::string want = ext.at("output").get<std::string>();
      if (!ours.ok()) {
        ADD_FAILURE() << label << ": extended oracle rendered, kvserve failed: " << ours.status().ToString()
                      << " (plain oracle: " << oracle_error << ")";
      } else if (*ours != want) {
        ADD_FAILURE() << label << " (extended oracle): " << Diff(want, *ours);
      } else {
        ++matched_ext;
      }
      continue;
    }
    const std::string ext_error = ext.at("error").get<std::string>();
    bool gap = false;
    for (const char* g : kOracleGaps) gap = gap || ext_error.find(g) != std::string::npos;
    if (ours.ok()) {
      if (gap) {
        ++oracle_gap;
        ++gap_templates[templates[job.t].filename().string()];
      } else {
        ADD_FAILURE() << label << ": oracle raised '" << ext_error << "' but kvserve rendered "
                      << ordered_json(ours->substr(0, 300)).dump();
      }
      continue;
    }
    // A template's own raise_exception must surface with its message.
    const std::string& msg = ours.status().message();
    if (msg.find("raise_exception: ") != std::string::npos) {
      EXPECT_NE(msg.find(ext_error), std::string::npos) << label << ": oracle raised '" << ext_error
                                                        << "', kvserve: " << msg;
    }
    if (verbose) std::cout << label << ":\n  oracle:  " << ext_error << "\n  kvserve: " << msg << "\n";
    ++both_raised;
  }
  std::cout << "chat template oracle: " << jobs.size() << " pairs (" << templates.size() << " templates x "
            << conversations.size() << " conversations): " << matched << " identical to @huggingface/jinja, "
            << matched_ext << " identical to its extended mode, " << both_raised << " raised by both, " << oracle_gap
            << " rendered by kvserve where the oracle cannot express the construct";
  for (const auto& [name, n] : gap_templates) std::cout << " [" << name << ": " << n << "]";
  std::cout << "\n";
  fs::remove_all(tmp);
}

}  // namespace chat_template_oracle_test
}  // namespace kvs::tmpl
