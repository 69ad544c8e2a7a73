// Gateway configuration: loading, errors that name the key, overrides,
// cross-key validation, and configs/gateway.yaml documenting every key.
#include "gateway/config.h"

#include "gateway/client_address.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace kvs::gateway {
namespace {

constexpr const char* kTwoPools = R"(
gateway:
  port: 9000
  key_file: /tmp/keys.yaml
  rate_limit_per_second: 50
  shared_state: redis://127.0.0.1:6379
pools:
  - name: short
    max_context: 4096
    first_token_timeout_seconds: 5
    replicas:
      - url: http://127.0.0.1:8001
      - {url: "http://127.0.0.1:8002", weight: 2}
  - name: long
    max_context: 32768
    replicas: [http://127.0.0.1:8003]
)";

TEST(GatewayConfigTest, LoadsTwoPools) {
  GatewayConfig c;
  ASSERT_TRUE(LoadGatewayConfigYaml(kTwoPools, &c).ok());
  EXPECT_EQ(c.gateway.port, 9000);
  EXPECT_EQ(c.gateway.rate_limit_per_second, 50);
  EXPECT_EQ(c.gateway.shared_state, "redis://127.0.0.1:6379");
  ASSERT_EQ(c.pools.size(), 2u);
  EXPECT_EQ(c.pools[0].name, "short");
  EXPECT_EQ(c.pools[0].first_token_timeout_seconds, 5);
  EXPECT_EQ(c.pools[0].total_timeout_seconds, 600);  // default
  ASSERT_EQ(c.pools[0].replicas.size(), 2u);
  EXPECT_EQ(c.pools[0].replicas[1].weight, 2);
  EXPECT_EQ(c.pools[1].replicas[0].url, "http://127.0.0.1:8003");
  EXPECT_TRUE(ValidateGatewayConfig(c).ok());
  auto j = GatewayConfigToJson(c);
  EXPECT_EQ(j["pools"][1]["max_context"], 32768);
}

TEST(GatewayConfigTest, ErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    const char* needle;
  };
  const Case cases[] = {
      {"gateway: {prot: 1}", "unknown key \"gateway.prot\""},
      {"gatway: {}", "unknown section \"gatway\""},
      {"gateway: {port: \"80\"}", "gateway.port: expected an integer"},
      {"gateway: {port: 70000}", "gateway.port"},
      {"gateway: {shared_state: memcached://x}", "gateway.shared_state"},
      {"gateway: {shared_state_failure: maybe}", "one of: open, closed, local"},
      {"pools: [{name: a, max_context: 10, colour: red}]", "pools[0] (a): unknown key \"colour\""},
      {"pools: [{name: a, max_context: -1}]", "pools[0] (a): max_context"},
      {"pools: [{name: a, max_context: 10, replicas: [{url: x, wieght: 1}]}]", "unknown key \"wieght\""},
      {"pools: [{name: a, max_context: 10, replicas: [{url: x, weight: 0}]}]", "weight"},
      {"pools: [{name: a, max_context: 10, on_overflow: truncate}]", "one of: reject, truncate_oldest_turns, truncate_middle"},
      {"pools: [{name: a, max_context: 10, clean_content: maybe}]", "pools[0] (a): clean_content"},
      {"pools: {a: 1}", "pools: expected a list"},
      {"gateway: [1]", "gateway: expected a mapping"},
      {"gateway: {port: [1]}", "gateway.port: expected a single value"},
  };
  for (const auto& c : cases) {
    GatewayConfig cfg;
    Status s = LoadGatewayConfigYaml(c.yaml, &cfg);
    EXPECT_FALSE(s.ok()) << c.yaml;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.yaml << " -> " << s.message();
  }
}

TEST(GatewayConfigTest, OverridesAndValidation) {
  GatewayConfig c;
  ASSERT_TRUE(LoadGatewayConfigYaml(kTwoPools, &c).ok());
  ASSERT_TRUE(ApplyGatewayOverrides({"--port", "9100", "--gateway.io_threads=3", "--audit-log", "off"}, &c).ok());
  EXPECT_EQ(c.gateway.port, 9100);
  EXPECT_EQ(c.gateway.io_threads, 3);
  EXPECT_EQ(c.logging.audit_log, "off");
  EXPECT_FALSE(ApplyGatewayOverrides({"--nope", "1"}, &c).ok());
  EXPECT_FALSE(ApplyGatewayOverrides({"--port"}, &c).ok());

  GatewayConfig none;
  EXPECT_NE(ValidateGatewayConfig(none).message().find("at least one pool"), std::string::npos);
  GatewayConfig dup;
  ASSERT_TRUE(LoadGatewayConfigYaml(
                  "gateway: {allow_anonymous: true}\npools: [{name: a, max_context: 8, replicas: [http://h:1]}, "
                  "{name: a, max_context: 9, replicas: [http://h:2]}]",
                  &dup)
                  .ok());
  EXPECT_NE(ValidateGatewayConfig(dup).message().find("used twice"), std::string::npos);
  GatewayConfig bad_url;
  ASSERT_TRUE(LoadGatewayConfigYaml(
                  "gateway: {allow_anonymous: true}\npools: [{name: a, max_context: 8, replicas: [ftp://h]}]", &bad_url)
                  .ok());
  EXPECT_NE(ValidateGatewayConfig(bad_url).message().find("replicas[0].url"), std::string::npos);
  GatewayConfig no_keys;
  ASSERT_TRUE(LoadGatewayConfigYaml("pools: [{name: a, max_context: 8, replicas: [http://h:1]}]", &no_keys).ok());
  EXPECT_NE(ValidateGatewayConfig(no_keys).message().find("gateway.key_file is required"), std::string::npos);
}

// TLS keys (issue 33 items 7, 8): both files or neither; the Redis CA and
// password variable only with Redis; the Redis password never printed.
TEST(GatewayConfigTest, TlsAndRedisCredentials) {
  const std::string pools = "pools: [{name: a, max_context: 8, tls_ca_file: /ca.pem, replicas: [https://h:1]}]\n";
  GatewayConfig ok;
  ASSERT_TRUE(LoadGatewayConfigYaml("gateway: {allow_anonymous: true, tls_cert_file: c.pem, tls_key_file: k.pem, "
                                    "shared_state: \"rediss://u:p%40ss@redis.test:6380\", shared_state_tls_ca_file: "
                                    "ca.pem}\n" + pools,
                                    &ok)
                  .ok());
  EXPECT_TRUE(ValidateGatewayConfig(ok).ok()) << ValidateGatewayConfig(ok).message();
  EXPECT_EQ(ok.pools[0].tls_ca_file, "/ca.pem");
  const std::string printed = GatewayConfigToJson(ok).dump();
  EXPECT_EQ(printed.find("p%40ss"), std::string::npos) << printed;
  EXPECT_NE(printed.find("rediss://u:<redacted>@redis.test:6380"), std::string::npos) << printed;
  struct Case {
    std::string yaml, needle;
  };
  const Case cases[] = {
      {"gateway: {allow_anonymous: true, tls_cert_file: c.pem}", "gateway.tls_key_file"},
      {"gateway: {allow_anonymous: true, tls_key_file: k.pem}", "gateway.tls_cert_file"},
      {"gateway: {allow_anonymous: true, shared_state: \"redis://h:1\", shared_state_tls_ca_file: ca.pem}",
       "gateway.shared_state_tls_ca_file"},
      {"gateway: {allow_anonymous: true, shared_state_password_env: PW}", "gateway.shared_state_password_env"},
  };
  for (const auto& c : cases) {
    GatewayConfig cfg;
    ASSERT_TRUE(LoadGatewayConfigYaml(c.yaml + "\n" + pools, &cfg).ok()) << c.yaml;
    Status s = ValidateGatewayConfig(cfg);
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.yaml << " -> " << s.message();
  }
  GatewayConfig bad;
  Status s = LoadGatewayConfigYaml("gateway: {shared_state: \"redis://u:p@\"}", &bad);
  EXPECT_NE(s.message().find("gateway.shared_state"), std::string::npos) << s.message();
}

// configs/gateway.yaml loads, and documents every key with its default.
TEST(GatewayConfigTest, ShippedExampleDocumentsEveryKey) {
  const char* src = std::getenv("KVSERVE_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const std::string path = std::string(src) + "/configs/gateway.yaml";
  GatewayConfig c;
  Status s = LoadGatewayConfigFile(path, &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(ValidateGatewayConfig(c).ok());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  for (const auto& k : GatewayConfigKeys()) {
    std::string leaf = k.key.substr(k.key.rfind('.') + 1);
    EXPECT_NE(text.find(leaf + ":"), std::string::npos) << k.key << " is not in configs/gateway.yaml";
  }
}

// The gateway configuration shipped in the Kubernetes manifests loads and
// validates (the ConfigMap's gateway.yaml).
TEST(GatewayConfigTest, KubernetesConfigMapLoads) {
  const char* src = std::getenv("KVSERVE_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const std::vector<YAML::Node> docs = YAML::LoadAllFromFile(std::string(src) + "/deploy/kubernetes/gateway.yaml");
  int found = 0;
  for (const YAML::Node& d : docs) {
    if (!d["kind"] || d["kind"].as<std::string>() != "ConfigMap" || !d["data"]["gateway.yaml"]) continue;
    ++found;
    GatewayConfig c;
    Status s = LoadGatewayConfigYaml(d["data"]["gateway.yaml"].as<std::string>(), &c);
    ASSERT_TRUE(s.ok()) << s.message();
    s = ValidateGatewayConfig(c);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(c.pools.size(), 2u);
    EXPECT_FALSE(c.gateway.key_file.empty()) << "the deployed gateway authenticates";
  }
  EXPECT_EQ(found, 1);
}

TEST(TrustedProxiesTest, OnlyATrustedPeerNamesTheClient) {
  auto t = TrustedProxies::Parse("10.0.0.0/8, 192.168.1.5 ,::1, 2001:db8::/32");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(t->Contains("10.1.2.3"));
  EXPECT_FALSE(t->Contains("11.0.0.1"));
  EXPECT_TRUE(t->Contains("192.168.1.5"));
  EXPECT_FALSE(t->Contains("192.168.1.6"));
  EXPECT_TRUE(t->Contains("::1"));
  EXPECT_TRUE(t->Contains("2001:db8:1::7"));
  EXPECT_FALSE(t->Contains("2001:db9::1"));
  EXPECT_FALSE(t->Contains("not an address"));
  // An untrusted peer is the client, whatever it claims.
  EXPECT_EQ(t->ClientOf("203.0.113.1", "1.1.1.1"), "203.0.113.1");
  // Right to left past trusted hops; what the client wrote (left) is ignored.
  EXPECT_EQ(t->ClientOf("10.0.0.1", "6.6.6.6, 198.51.100.2, 10.9.9.9"), "198.51.100.2");
  EXPECT_EQ(t->ClientOf("10.0.0.1", ""), "10.0.0.1");
  EXPECT_EQ(t->ClientOf("10.0.0.1", "garbage, 198.51.100.2"), "198.51.100.2");
  EXPECT_EQ(t->ClientOf("10.0.0.1", "198.51.100.2, garbage"), "10.0.0.1");  // a malformed last hop: stop there
  EXPECT_EQ(PeerAddress("127.0.0.1:5000"), "127.0.0.1");
  for (const char* bad : {"10.0.0.0/33", "300.1.1.1", "::1/129", "10.0.0.0/", "x"}) {
    EXPECT_FALSE(TrustedProxies::Parse(bad).ok()) << bad;
  }
  EXPECT_TRUE(TrustedProxies::Parse("")->empty());
}

}  // namespace
}  // namespace kvs::gateway
