#include "server/config.h"

#include <fstream>

#include <gtest/gtest.h>

#include "base/test_util.h"

namespace kvs::server {
namespace {

void ExpectError(const Status& s, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(s.ok()) << "expected an error";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (const auto& f : fragments) EXPECT_NE(s.message().find(f), std::string::npos) << s.message() << " lacks " << f;
}

TEST(ConfigTest, DefaultsAreTheDocumentedOnes) {
  ServeConfig c;
  EXPECT_EQ(c.server.port, 8000);
  EXPECT_EQ(c.model.max_context_length, 32768);
  EXPECT_DOUBLE_EQ(c.kv_cache.memory_fraction, 0.45);
  EXPECT_EQ(c.runtime.max_batch_size, 32);
  EXPECT_EQ(c.runtime.max_concurrent_requests, 64);
  EXPECT_DOUBLE_EQ(c.runtime.request_timeout_seconds, 120);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(ConfigTest, LoadsEverySection) {
  ServeConfig c;
  ASSERT_TRUE(LoadConfigYaml(R"(
server:
  host: 0.0.0.0
  port: 9000
  api_keys: [k1, "k2"]
  api_key_file: ""
  max_body_bytes: 2048
  drain_timeout_seconds: 5.5
model:
  path: /m/x.gguf
  name: tiny
  dtype: BF16
  max_context_length: 4096
  sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
kv_cache:
  memory_fraction: 0.9
  block_size: 32
  dtype: q8_0
  prefix_caching: false
runtime:
  threads: 8
  max_batch_size: 4
  max_num_batched_tokens: 512
  max_concurrent_requests: 10
  request_timeout_seconds: 0
logging:
  level: debug
  access_log: /tmp/access.log
)",
                             &c)
                  .ok());
  EXPECT_EQ(c.server.host, "0.0.0.0");
  EXPECT_EQ(c.server.port, 9000);
  EXPECT_EQ(c.server.api_keys, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(c.server.max_body_bytes, 2048);
  EXPECT_DOUBLE_EQ(c.server.drain_timeout_seconds, 5.5);
  EXPECT_EQ(c.model.path, "/m/x.gguf");
  EXPECT_EQ(c.model.name, "tiny");
  EXPECT_EQ(c.model.dtype, "bf16");
  EXPECT_EQ(c.model.max_context_length, 4096);
  EXPECT_EQ(c.model.sha256.size(), 64u);
  EXPECT_DOUBLE_EQ(c.kv_cache.memory_fraction, 0.9);
  EXPECT_EQ(c.kv_cache.block_size, 32);
  EXPECT_EQ(c.kv_cache.dtype, "q8_0");
  EXPECT_FALSE(c.kv_cache.prefix_caching);
  EXPECT_EQ(c.runtime.threads, 8);
  EXPECT_EQ(c.runtime.max_batch_size, 4);
  EXPECT_EQ(c.runtime.max_num_batched_tokens, 512);
  EXPECT_EQ(c.runtime.max_concurrent_requests, 10);
  EXPECT_DOUBLE_EQ(c.runtime.request_timeout_seconds, 0);
  EXPECT_EQ(c.logging.level, "debug");
  EXPECT_EQ(c.logging.access_log, "/tmp/access.log");
}

TEST(ConfigTest, EmptyFileAndNullValuesKeepDefaults) {
  ServeConfig c;
  EXPECT_TRUE(LoadConfigYaml("", &c).ok());
  EXPECT_TRUE(LoadConfigYaml("server:\n  port:\nmodel:\n", &c).ok());
  EXPECT_EQ(c.server.port, 8000);
}

TEST(ConfigTest, UnknownKeysAndSectionsAreNamed) {
  ServeConfig c;
  ExpectError(LoadConfigYaml("server:\n  prot: 1\n", &c), {"server.prot", "did you mean server.port", "host"});
  ExpectError(LoadConfigYaml("srever:\n  port: 1\n", &c), {"unknown section \"srever\""});
  ExpectError(LoadConfigYaml("server:\n  port: 1\n  port: 2\n", &c), {"server.port", "twice"});
  ExpectError(LoadConfigYaml("- a\n- b\n", &c), {"mapping"});
  ExpectError(LoadConfigYaml("server: 3\n", &c), {"server", "mapping"});
  ExpectError(LoadConfigYaml("server: {port: [1\n", &c), {"YAML syntax error", "line"});
}

TEST(ConfigTest, WrongTypesAreNamedWithTheAllowedRange) {
  ServeConfig c;
  ExpectError(LoadConfigYaml("server:\n  port: \"8000\"\n", &c), {"server.port", "integer in [0, 65535]", "quoted"});
  ExpectError(LoadConfigYaml("server:\n  port: 80.5\n", &c), {"server.port", "integer"});
  ExpectError(LoadConfigYaml("server:\n  port: [1]\n", &c), {"server.port", "a list"});
  ExpectError(LoadConfigYaml("server:\n  host: {a: 1}\n", &c), {"server.host", "a string", "mapping"});
  ExpectError(LoadConfigYaml("server:\n  api_keys: [[a]]\n", &c), {"server.api_keys", "list of strings"});
  ExpectError(LoadConfigYaml("server:\n  api_keys: [a, \"\"]\n", &c), {"server.api_keys", "empty"});
  ExpectError(LoadConfigYaml("kv_cache:\n  prefix_caching: maybe\n", &c), {"kv_cache.prefix_caching", "true or false"});
  ExpectError(LoadConfigYaml("kv_cache:\n  memory_fraction: lots\n", &c), {"kv_cache.memory_fraction", "(0, 1]"});
  ExpectError(LoadConfigYaml("kv_cache:\n  dtype: q4_k\n", &c), {"kv_cache.dtype", "f16, bf16, f32, q8_0, q4_0, q4_1"});
  ExpectError(LoadConfigYaml("logging:\n  level: loud\n", &c), {"logging.level", "trace", "off"});
  ExpectError(LoadConfigYaml("model:\n  sha256: abc\n", &c), {"model.sha256", "64 hexadecimal"});
}

TEST(ConfigTest, ImpossibleValuesAreRefused) {
  ServeConfig c;
  ExpectError(LoadConfigYaml("server:\n  port: 70000\n", &c), {"server.port", "[0, 65535]", "70000"});
  ExpectError(LoadConfigYaml("server:\n  port: -1\n", &c), {"server.port"});
  ExpectError(LoadConfigYaml("kv_cache:\n  memory_fraction: 0\n", &c), {"kv_cache.memory_fraction", "(0, 1]"});
  ExpectError(LoadConfigYaml("kv_cache:\n  memory_fraction: 1.5\n", &c), {"kv_cache.memory_fraction"});
  ExpectError(LoadConfigYaml("kv_cache:\n  block_size: 24\n", &c), {"kv_cache.block_size", "power of two"});
  ExpectError(LoadConfigYaml("kv_cache:\n  block_size: 512\n", &c), {"kv_cache.block_size", "[1, 256]"});
  ExpectError(LoadConfigYaml("runtime:\n  max_batch_size: 0\n", &c), {"runtime.max_batch_size", "[1, 4096]"});
  ExpectError(LoadConfigYaml("runtime:\n  request_timeout_seconds: -3\n", &c), {"runtime.request_timeout_seconds"});
  ExpectError(LoadConfigYaml("server:\n  drain_timeout_seconds: .nan\n", &c), {"server.drain_timeout_seconds"});
  ExpectError(LoadConfigYaml("model:\n  max_context_length: 8\n", &c), {"model.max_context_length", "[16,"});
  ExpectError(LoadConfigYaml("server:\n  host: \"\"\n", &c), {"server.host", "non-empty"});
}

TEST(ConfigTest, CrossKeyChecks) {
  ServeConfig c;
  c.runtime.max_batch_size = 64;
  c.runtime.max_num_batched_tokens = 32;
  ExpectError(ValidateConfig(c), {"runtime.max_num_batched_tokens", "runtime.max_batch_size"});
  c = ServeConfig();
  c.model.max_context_length = 16;
  c.kv_cache.block_size = 32;
  ExpectError(ValidateConfig(c), {"model.max_context_length", "kv_cache.block_size"});
}

TEST(ConfigTest, ChatTemplateIsABuiltinOrAReadableFile) {
  ServeConfig c;
  ASSERT_TRUE(ApplyOverrides({"--chat-template", "llama3"}, &c).ok());
  EXPECT_EQ(c.model.chat_template, "llama3");
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.model.chat_template = "/nonexistent/t.jinja";
  ExpectError(ValidateConfig(c), {"model.chat_template", "/nonexistent/t.jinja", "chatml", "readable file"});
  c.model.chat_template = testing::SourceDir() + "/configs";  // a directory
  ExpectError(ValidateConfig(c), {"model.chat_template", "readable file"});
  c.model.chat_template = testing::SourceDir() + "/configs/default.yaml";  // any readable file passes here;
  EXPECT_TRUE(ValidateConfig(c).ok());                                    // parsing is the model load's
}

TEST(ConfigTest, CommandLineOverridesByKeyOrAliasWithAnySyntax) {
  ServeConfig c;
  ASSERT_TRUE(LoadConfigYaml("server:\n  port: 9000\n", &c).ok());
  ASSERT_TRUE(ApplyOverrides({"--server.port", "8001", "--threads=3", "-m", "/x.gguf", "--api-keys", "a,b",
                              "--kv_cache.prefix_caching", "off", "--request-timeout", "2.5"},
                             &c)
                  .ok());
  EXPECT_EQ(c.server.port, 8001);
  EXPECT_EQ(c.runtime.threads, 3);
  EXPECT_EQ(c.model.path, "/x.gguf");
  EXPECT_EQ(c.server.api_keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(c.kv_cache.prefix_caching);
  EXPECT_DOUBLE_EQ(c.runtime.request_timeout_seconds, 2.5);
  // Later overrides win.
  ASSERT_TRUE(ApplyOverrides({"--port", "1", "--server.port=2"}, &c).ok());
  EXPECT_EQ(c.server.port, 2);
}

TEST(ConfigTest, BadOverridesAreNamed) {
  ServeConfig c;
  ExpectError(ApplyOverrides({"--server.prot", "1"}, &c), {"--server.prot", "did you mean server.port"});
  ExpectError(ApplyOverrides({"--port"}, &c), {"--port", "needs a value"});
  ExpectError(ApplyOverrides({"--port", "x"}, &c), {"server.port", "integer"});
  ExpectError(ApplyOverrides({"8000"}, &c), {"unexpected argument"});
}

TEST(ConfigTest, EveryKeyIsDocumentedAndOverridable) {
  ASSERT_GE(ConfigKeys().size(), 20u);
  const std::string help = ConfigHelp();
  for (const auto& k : ConfigKeys()) {
    EXPECT_FALSE(k.help.empty()) << k.key;
    EXPECT_FALSE(k.allowed.empty()) << k.key;
    EXPECT_NE(help.find(k.key), std::string::npos) << k.key;
    // Setting each key to its default from the command line is accepted.
    ServeConfig c;
    std::string v = k.default_value;
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    if (v == "[]" || v.empty()) continue;
    EXPECT_TRUE(SetConfigValue(k.key, v, &c).ok()) << k.key << " = " << v;
  }
}

TEST(ConfigTest, ShippedDefaultYamlMatchesTheBuiltInDefaultsAndDocumentsEveryKey) {
  const std::string path = testing::SourceDir() + "/configs/default.yaml";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << path << " not found";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ServeConfig c;
  ASSERT_TRUE(LoadConfigYaml(text, &c).ok());
  ServeConfig d;
  d.model.path = c.model.path;  // the shipped file names a model
  EXPECT_EQ(ConfigToJson(c).dump(), ConfigToJson(d).dump());
  for (const auto& k : ConfigKeys()) {
    // "section.key" is "key:" in the file; "section.sub.key" is "sub:" with
    // "key:" nested under it.
    size_t from = k.key.find('.') + 1, at = 0;
    for (size_t dot; (dot = k.key.find('.', from)) != std::string::npos; from = dot + 1) {
      at = text.find(k.key.substr(from, dot - from) + ":", at);
    }
    EXPECT_NE(at == std::string::npos ? at : text.find(k.key.substr(from) + ":", at), std::string::npos)
        << "configs/default.yaml lacks " << k.key;
  }
}

TEST(ConfigTest, ApiKeyFileIsReadAndCommentsSkipped) {
  auto dir = testing::TempDir("config");
  const std::string path = (dir / "keys.txt").string();
  {
    std::ofstream out(path);
    out << "# team keys\nkey-one\n\n  key-two  # trailing comment\n";
  }
  ServeConfig c;
  c.server.api_keys = {"inline"};
  c.server.api_key_file = path;
  auto keys = LoadApiKeys(c);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{"inline", "key-one", "key-two"}));
  c.server.api_key_file = (dir / "missing").string();
  EXPECT_EQ(LoadApiKeys(c).status().code(), StatusCode::kNotFound);
  {
    std::ofstream out(path);
    out << "# nothing\n";
  }
  c.server.api_key_file = path;
  EXPECT_FALSE(LoadApiKeys(c).ok());
}

// Issue 10 item 10: a key may contain '#'; only '#' at the start of a line
// or after whitespace starts a comment.
TEST(ConfigTest, ApiKeyFileKeepsHashInsideAKey) {
  auto dir = testing::TempDir("config");
  const std::string path = (dir / "keys.txt").string();
  {
    std::ofstream out(path);
    out << "sk-a#b#c\n#comment\n  k#2\t# note\nk3 #x\n";
  }
  ServeConfig c;
  c.server.api_key_file = path;
  auto keys = LoadApiKeys(c);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{"sk-a#b#c", "k#2", "k3"}));
}

// Issue 10 item 10: a keep-alive (or header) timeout below 1 ms became 0 ms
// (every idle connection closed at once); it is refused with the range named.
TEST(ConfigTest, TimeoutsBelowOneMillisecondAreRejected) {
  ServeConfig c;
  ExpectError(LoadConfigYaml("server:\n  keep_alive_timeout_seconds: 0.0004\n", &c),
              {"server.keep_alive_timeout_seconds", "[0.001, 3600]"});
  ExpectError(LoadConfigYaml("server:\n  keep_alive_timeout_seconds: 0\n", &c), {"server.keep_alive_timeout_seconds"});
  ExpectError(LoadConfigYaml("server:\n  header_timeout_seconds: 1e-6\n", &c), {"server.header_timeout_seconds"});
  ASSERT_TRUE(LoadConfigYaml("server:\n  keep_alive_timeout_seconds: 0.001\n", &c).ok());
  EXPECT_DOUBLE_EQ(c.server.keep_alive_timeout_seconds, 0.001);
}

TEST(ConfigTest, JsonRedactsApiKeys) {
  ServeConfig c;
  c.server.api_keys = {"secret-key"};
  const std::string j = ConfigToJson(c).dump();
  EXPECT_EQ(j.find("secret-key"), std::string::npos);
  EXPECT_NE(j.find("<1 keys>"), std::string::npos);
}

}  // namespace
}  // namespace kvs::server
