// Key file: round trip, constant-time lookup by digest, reload on change.
#include "gateway/keys.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/test_util.h"

namespace kvs::gateway {
namespace {

std::string TempPath(const char* name) { return (kvs::testing::TempDir("keys") / (std::string(name) + ".yaml")).string(); }

KeyFile WithKey(const std::string& key, const std::string& tenant) {
  KeyFile f;
  f.tenants[tenant].tokens_per_minute = 2000;
  f.tenants[tenant].max_concurrent = 3;
  KeyEntry e;
  e.sha256 = KeyDigest(key);
  e.id = KeyIdOfDigest(e.sha256);
  e.tenant = tenant;
  e.created = "2025-01-01T00:00:00Z";
  f.keys.push_back(e);
  return f;
}

TEST(KeysTest, GeneratedKeysAreDistinctAndStoredOnlyAsDigests) {
  auto a = GenerateApiKey(), b = GenerateApiKey();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->rfind("sk-kvs-", 0), 0u);
  KeyFile f = WithKey(*a, "acme");
  const std::string text = f.Serialize();
  EXPECT_EQ(text.find(*a), std::string::npos);
  EXPECT_NE(text.find(KeyDigest(*a)), std::string::npos);
  auto back = KeyFile::Parse(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->keys.size(), 1u);
  EXPECT_EQ(back->keys[0].id, "k-" + KeyDigest(*a).substr(0, 8));
  EXPECT_EQ(back->tenants["acme"].tokens_per_minute, 2000);
  EXPECT_EQ(back->tenants["acme"].max_concurrent, 3);
  EXPECT_EQ(back->tenants["acme"].priority, 0);
  f.tenants["acme"].priority = 7;
  back = KeyFile::Parse(f.Serialize());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->tenants["acme"].priority, 7);
  EXPECT_FALSE(KeyFile::Parse("tenants: {a: {priority: 1.5}}").ok());
}

TEST(KeysTest, AuthenticateFindsTheTenant) {
  KeyStore s(WithKey("sk-one", "acme"));
  auto p = s.Authenticate("sk-one");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->tenant, "acme");
  EXPECT_EQ(p->limits.tokens_per_minute, 2000);
  EXPECT_EQ(p->key_id, KeyIdOfDigest(KeyDigest("sk-one")));
  EXPECT_FALSE(s.Authenticate("sk-two").has_value());
  EXPECT_FALSE(s.Authenticate("").has_value());
  EXPECT_FALSE(s.Authenticate("sk-one ").has_value());
}

TEST(KeysTest, ParseErrors) {
  EXPECT_FALSE(KeyFile::Parse("keys: [{tenant: a, sha256: abc}]").ok());
  EXPECT_FALSE(KeyFile::Parse("keys: [{sha256: " + std::string(64, 'a') + "}]").ok());
  EXPECT_FALSE(KeyFile::Parse("tenants: {a: {tokens_per_minit: 5}}").ok());
  EXPECT_FALSE(KeyFile::Parse("tenants: {a: {tokens_per_minute: -5}}").ok());
  EXPECT_FALSE(KeyFile::Parse("colours: []").ok());
  EXPECT_TRUE(KeyFile::Parse("").ok());
  // A key whose tenant has no entry would run without limits: refused.
  const std::string digest(64, 'a');
  auto orphan = KeyFile::Parse("tenants: {a: {}}\nkeys: [{tenant: b, sha256: " + digest + "}]");
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.status().message().find("tenant \"b\" has no entry under tenants"), std::string::npos);
  EXPECT_TRUE(KeyFile::Parse("tenants: {b: {}}\nkeys: [{tenant: b, sha256: " + digest + "}]").ok());
}

TEST(KeysTest, AuthenticatorReloadsOnChangeAndKeepsOldKeysOnError) {
  const std::string path = TempPath("kvs-keys-");
  ASSERT_TRUE(WithKey("sk-old", "acme").Save(path).ok());
  auto a = Authenticator::Open(path);
  ASSERT_TRUE(a.ok());
  auto old_snapshot = (*a)->Current();
  EXPECT_TRUE(old_snapshot->Authenticate("sk-old").has_value());
  // Rotation: add the new key...
  KeyFile both = WithKey("sk-old", "acme");
  both.keys.push_back(WithKey("sk-new", "acme").keys[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(both.Save(path).ok());
  // The change is loaded once it has held still for a poll (FileWatch).
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_FALSE((*a)->Current()->Authenticate("sk-new").has_value());
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_TRUE((*a)->Current()->Authenticate("sk-new").has_value());
  EXPECT_TRUE((*a)->Current()->Authenticate("sk-old").has_value());
  // ...later revoke the old one.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(WithKey("sk-new", "acme").Save(path).ok());
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_FALSE((*a)->Current()->Authenticate("sk-old").has_value());
  // A request admitted earlier still holds its snapshot.
  EXPECT_TRUE(old_snapshot->Authenticate("sk-old").has_value());
  // A broken file: the loaded keys stay.
  { std::ofstream(path) << "keys: [oops"; }
  EXPECT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_FALSE((*a)->ReloadIfChanged().ok());
  EXPECT_TRUE((*a)->Current()->Authenticate("sk-new").has_value());
  EXPECT_TRUE((*a)->ReloadIfChanged().ok()) << "tried once per change";
}

// A file rewritten in place is empty between its truncation and its write:
// a poll that sees it then must not load it (a key file with no keys would
// refuse every request until the next change).
TEST(KeysTest, AuthenticatorNeverLoadsAFileCaughtMidWrite) {
  const std::string path = TempPath("kvs-keys-");
  ASSERT_TRUE(WithKey("sk-old", "acme").Save(path).ok());
  auto a = Authenticator::Open(path);
  ASSERT_TRUE(a.ok());
  const uint64_t reloads = (*a)->reloads();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  { std::ofstream truncated(path, std::ios::trunc); }
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_TRUE((*a)->Current()->Authenticate("sk-old").has_value()) << "the empty file was loaded";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  KeyFile both = WithKey("sk-old", "acme");
  both.keys.push_back(WithKey("sk-new", "acme").keys[0]);
  ASSERT_TRUE(both.Save(path).ok());
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_EQ((*a)->reloads(), reloads) << "loaded while it was still changing";
  ASSERT_TRUE((*a)->ReloadIfChanged().ok());
  EXPECT_EQ((*a)->reloads(), reloads + 1);
  EXPECT_TRUE((*a)->Current()->Authenticate("sk-old").has_value());
  EXPECT_TRUE((*a)->Current()->Authenticate("sk-new").has_value());
}

}  // namespace
}  // namespace kvs::gateway
