#include "frontend/config_keys.h"

#include <gtest/gtest.h>

namespace kvs::frontend {
namespace {

struct Demo {
  struct {
    int64_t port = 8000;
    double ratio = 0.5;
    bool cache = true;
    std::string host = "localhost";
    std::string level = "info";
    std::vector<std::string> keys;
  } net;
  int64_t flat = 3;
};

using Table = KeyTable<Demo>;

const Table& Keys() {
  static const Table t = [] {
    std::vector<Table::Key> k;
    k.push_back(Table::Int("net.port", "port", [](Demo& d) -> int64_t& { return d.net.port; }, 0, 65535, "Port"));
    k.push_back(Table::Number("net.ratio", "ratio", [](Demo& d) -> double& { return d.net.ratio; }, 0, true, 1,
                              "Ratio"));
    k.push_back(Table::Bool("net.cache", "", [](Demo& d) -> bool& { return d.net.cache; }, "Cache"));
    k.push_back(Table::String(
        "net.host", "host", [](Demo& d) -> std::string& { return d.net.host; }, "a host", "Host",
        [](const std::string& s) { return s.empty() ? std::string("a non-empty string") : std::string(); }));
    k.push_back(Table::Enum("net.level", "log-level", [](Demo& d) -> std::string& { return d.net.level; },
                            {"debug", "info"}, "Level"));
    k.push_back(Table::List("net.keys", "", [](Demo& d) -> std::vector<std::string>& { return d.net.keys; }, "Keys"));
    k.push_back(Table::Int(
        "flat", "", [](Demo& d) -> int64_t& { return d.flat; }, 1, 64, "Even", [](int64_t x) {
          return x % 2 == 0 ? std::string() : std::string("must be even");
        },
        "an even number in [1, 64]"));
    return Table(std::move(k));
  }();
  return t;
}

Status Load(const std::string& yaml, Demo* d) {
  auto root = ParseYaml(yaml);
  if (!root.ok()) return root.status();
  return Keys().LoadSection("net", (*root)["net"], d);
}

void ExpectMessage(const Status& s, const std::string& text) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), text);
}

TEST(KeyTable, LoadsTypedValuesFromYaml) {
  Demo d;
  ASSERT_TRUE(Load("net: {port: 81, ratio: 1, cache: Off, host: \"h\", level: DEBUG, keys: [a, b], ratio2: }", &d)
                  .message()
                  .find("net.ratio2") != std::string::npos);
  Demo e;
  Status s = Load("net: {port: 81, ratio: 1, cache: Off, host: \"h\", level: DEBUG, keys: [a, b]}", &e);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(e.net.port, 81);
  EXPECT_EQ(e.net.ratio, 1.0);
  EXPECT_FALSE(e.net.cache);
  EXPECT_EQ(e.net.host, "h");
  EXPECT_EQ(e.net.level, "debug");
  EXPECT_EQ(e.net.keys, (std::vector<std::string>{"a", "b"}));
  // An empty value keeps the default; an empty section too.
  Demo f;
  ASSERT_TRUE(Load("net: {port: }", &f).ok());
  EXPECT_EQ(f.net.port, 8000);
  ASSERT_TRUE(Load("net:", &f).ok());
}

TEST(KeyTable, ErrorsNameTheKeyAndWhatItAccepts) {
  Demo d;
  ExpectMessage(Load("net: {port: 70000}", &d), "net.port: expected an integer in [0, 65535], got \"70000\"");
  ExpectMessage(Load("net: {port: \"80\"}", &d),
                "net.port: expected an integer in [0, 65535], got the quoted string \"80\"");
  ExpectMessage(Load("net: {port: [1]}", &d),
                "net.port: expected a single value (an integer in [0, 65535]), got a list");
  ExpectMessage(Load("net: {ratio: 0}", &d), "net.ratio: expected a number in (0, 1], got \"0\"");
  ExpectMessage(Load("net: {ratio: .nan}", &d), "net.ratio: expected a number in (0, 1], got \".nan\"");
  ExpectMessage(Load("net: {cache: maybe}", &d), "net.cache: expected true or false, got \"maybe\"");
  ExpectMessage(Load("net: {host: \"\"}", &d), "net.host: expected a non-empty string, got the quoted string \"\"");
  ExpectMessage(Load("net: {host: {a: 1}}", &d), "net.host: expected a single value (a string), got a mapping");
  ExpectMessage(Load("net: {level: loud}", &d), "net.level: expected one of: debug, info, got \"loud\"");
  ExpectMessage(Load("net: {keys: [a, \"\"]}", &d), "net.keys: item 1 is empty; expected non-empty strings");
  ExpectMessage(Load("net: {keys: [[a]]}", &d), "net.keys: expected a list of strings, got a mapping");
  ExpectMessage(Load("net: {prot: 1}", &d),
                "unknown key \"net.prot\" (did you mean net.port?); keys of net are: port, ratio, cache, host, level, "
                "keys");
  ExpectMessage(Load("net: {port: 1, port: 2}", &d), "key \"net.port\" appears twice");
  ExpectMessage(Load("net: 3", &d), "net: expected a mapping of keys (port, ratio, cache, host, level, keys)");
  EXPECT_NE(Load("net: {port: [1", &d).message().find("YAML syntax error at line 1"), std::string::npos);
}

TEST(KeyTable, CredentialsAreNotEchoed) {
  Demo d;
  Status s = Keys().SetOption(&d, "port", "redis://u:secret@h", "see --help");
  EXPECT_EQ(s.message().find("secret"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("<redacted>"), std::string::npos) << s.message();
}

TEST(KeyTable, CommandLineByNameOrAliasWithSuggestions) {
  Demo d;
  ASSERT_TRUE(Keys().SetOption(&d, "port", "9000", "").ok());
  ASSERT_TRUE(Keys().SetOption(&d, "net.keys", "x,y", "").ok());
  ASSERT_TRUE(Keys().SetOption(&d, "flat", "4", "").ok());
  EXPECT_EQ(d.net.port, 9000);
  EXPECT_EQ(d.net.keys, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(d.flat, 4);
  ExpectMessage(Keys().SetOption(&d, "flat", "5", ""), "flat: must be even, got 5");
  ExpectMessage(Keys().SetOption(&d, "flat", "99", ""), "flat: expected an integer in an even number in [1, 64], got \"99\"");
  ExpectMessage(Keys().SetOption(&d, "prot", "1", "`demo --help` lists them"),
                "unknown option --prot (did you mean net.port?); `demo --help` lists them");
  ExpectMessage(Keys().UnknownOption("zzzzzzzz", "hint"), "unknown option --zzzzzzzz; hint");
  EXPECT_EQ(Keys().Suggest("log-levl"), " (did you mean net.level?)");
  EXPECT_EQ(Keys().Find("log-level"), Keys().FindName("net.level"));
  EXPECT_EQ(Keys().FindName("log-level"), nullptr);
}

TEST(KeyTable, DescribesKeysForHelpAndJson) {
  const std::vector<KeyInfo> infos = Keys().Infos(Demo{});
  ASSERT_EQ(infos.size(), Keys().keys().size());
  EXPECT_EQ(infos[0].key, "net.port");
  EXPECT_EQ(infos[0].alias, "--port");
  EXPECT_EQ(infos[0].type, "integer");
  EXPECT_EQ(infos[0].allowed, "[0, 65535]");
  EXPECT_EQ(infos[0].default_value, "8000");
  EXPECT_EQ(infos[4].type, "one of");
  EXPECT_EQ(infos[4].default_value, "\"info\"");
  EXPECT_EQ(infos[5].type, "list of strings");
  const std::vector<KeyInfo> prefixed = Keys().Infos(Demo{}, "x[].", false);
  EXPECT_EQ(prefixed[0].key, "x[].net.port");
  EXPECT_FALSE(prefixed[0].option);

  const std::string help = KeyHelp("Keys:", infos);
  EXPECT_EQ(help.substr(0, 6), "Keys:\n");
  EXPECT_NE(help.find("  --net.port, --port                     Port\n"), std::string::npos) << help;
  EXPECT_NE(help.find("integer: [0, 65535]; default 8000\n"), std::string::npos) << help;
  EXPECT_NE(KeyHelp("", prefixed).find("  x[].net.port, --port"), std::string::npos);

  Demo d;
  d.net.port = 1;
  const nlohmann::json j = Keys().ToJson(d);
  EXPECT_EQ(j["net"]["port"], 1);
  EXPECT_EQ(j["flat"], 3);
  EXPECT_EQ(Keys().Names("net."), "port, ratio, cache, host, level, keys");
}

TEST(ConfigFiles, EditDistanceAndMissingFile) {
  EXPECT_EQ(EditDistance("port", "prot"), 2u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", "abc"), 0u);
  auto r = ReadConfigFile("/nonexistent/kvserve.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot read configuration file \"/nonexistent/kvserve.yaml\"");
}

}  // namespace
}  // namespace kvs::frontend
