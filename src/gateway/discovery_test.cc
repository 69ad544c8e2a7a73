// Replicas from DNS (discovery.h) with a scripted resolver: addresses join
// and leave the pool, a failed lookup keeps the replicas, an empty name
// unlists them, a returning address reuses its replica (probed again before
// it gets work), configured replicas are never touched; and the system
// resolver on names every machine has.
#include "gateway/discovery.h"

#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "gateway/router.h"
#include "gateway/routing.h"

namespace kvs::gateway {
namespace {

PoolConfig DnsPool() {
  PoolConfig p;
  p.name = "long";
  p.max_context = 4096;
  p.replicas = {{"http://127.0.0.1:9", 1}};
  ReplicaConfig e;
  e.url = "http://replicas.test:8000";
  e.weight = 2;
  e.version = "v2";
  p.replicas_dns = {e};
  return p;
}

struct Script {
  std::map<std::string, StatusOr<std::vector<std::string>>> answers;
  int calls = 0;
  // What replicas.test resolves to from now on.
  void Answer(StatusOr<std::vector<std::string>> a) { answers.insert_or_assign("replicas.test", std::move(a)); }
  ReplicaDiscovery::Resolver resolver() {
    return [this](const std::string& host) -> StatusOr<std::vector<std::string>> {
      ++calls;
      auto it = answers.find(host);
      if (it == answers.end()) return NotFound("{} has no addresses", host);
      return it->second;
    };
  }
};

std::vector<std::string> ListedNames(const Pool& p) {
  std::vector<std::string> out;
  for (Replica* r : p.replicas.Listed()) out.push_back(r->name());
  return out;
}

TEST(DiscoveryTest, AddressesJoinAndLeaveThePool) {
  Router router({DnsPool()}, std::make_unique<LeastOutstandingTokens>());
  Pool& pool = *router.pools()[0];
  Script dns;
  std::vector<std::string> joined, left;
  ReplicaDiscovery::Hooks hooks{[&](Replica* r) { joined.push_back(r->name()); },
                                [&](Replica* r) { left.push_back(r->name()); }};
  ReplicaDiscovery d(&router, dns.resolver(), hooks, std::chrono::milliseconds(50));
  ASSERT_TRUE(d.active());

  dns.Answer(std::vector<std::string>{"10.0.0.1", "fd00::2"});
  d.RefreshAll();
  EXPECT_EQ(ListedNames(pool),
            (std::vector<std::string>{"http://127.0.0.1:9", "http://10.0.0.1:8000", "http://[fd00::2]:8000"}));
  EXPECT_EQ(joined, (std::vector<std::string>{"http://10.0.0.1:8000", "http://[fd00::2]:8000"}));
  Replica* a = pool.replicas.Find("http://10.0.0.1:8000");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->weight(), 2);
  EXPECT_EQ(a->version(), "v2");
  EXPECT_EQ(a->health(), Replica::Health::kUnknown);  // probed before it gets work
  EXPECT_FALSE(a->available());
  a->OnProbe(true, false, 2);
  EXPECT_TRUE(a->available());

  // Nothing changed: no hooks.
  joined.clear();
  d.RefreshAll();
  EXPECT_TRUE(joined.empty());
  EXPECT_TRUE(left.empty());

  // A failed lookup keeps every replica.
  dns.Answer(Status(StatusCode::kUnavailable, "SERVFAIL"));
  d.RefreshAll();
  EXPECT_EQ(ListedNames(pool).size(), 3u);
  EXPECT_TRUE(a->available());

  // One pod gone, one new: the gone one is unlisted (not available, not in
  // the router's list), the list keeps it for requests still holding it.
  dns.Answer(std::vector<std::string>{"fd00::2", "10.0.0.3"});
  d.RefreshAll();
  EXPECT_EQ(left, (std::vector<std::string>{"http://10.0.0.1:8000"}));
  EXPECT_EQ(joined, (std::vector<std::string>{"http://10.0.0.3:8000"}));
  EXPECT_FALSE(a->listed());
  EXPECT_FALSE(a->available());
  EXPECT_EQ(a->health(), Replica::Health::kUnknown);
  EXPECT_EQ(router.AllReplicas().size(), 3u);
  EXPECT_EQ(pool.replicas.size(), 4u);
  EXPECT_EQ(router.policy(pool).Pick(pool, {}, {}), nullptr) << "nothing probed yet but the configured replica";

  // It comes back: the same Replica, listed, unknown until probed.
  left.clear();
  joined.clear();
  dns.Answer(std::vector<std::string>{"10.0.0.1", "fd00::2", "10.0.0.3"});
  d.RefreshAll();
  EXPECT_EQ(joined, (std::vector<std::string>{"http://10.0.0.1:8000"}));
  EXPECT_TRUE(a->listed());
  EXPECT_EQ(pool.replicas.Find("http://10.0.0.1:8000"), a);
  EXPECT_EQ(pool.replicas.size(), 4u);
  EXPECT_FALSE(a->available());

  // The name has no addresses (every pod gone): all of its replicas leave;
  // the configured one stays.
  dns.answers.erase("replicas.test");
  d.RefreshAll();
  EXPECT_EQ(ListedNames(pool), (std::vector<std::string>{"http://127.0.0.1:9"}));
  EXPECT_EQ(left.size(), 3u);
}

// An address that is also a configured replica belongs to the configuration:
// discovery neither adds it twice nor unlists it.
TEST(DiscoveryTest, ConfiguredReplicasAreNotDuplicatedOrUnlisted) {
  PoolConfig cfg = DnsPool();
  cfg.replicas_dns[0].url = "http://replicas.test:9";
  Router router({cfg}, std::make_unique<LeastOutstandingTokens>());
  Pool& pool = *router.pools()[0];
  Script dns;
  ReplicaDiscovery d(&router, dns.resolver(), {}, std::chrono::milliseconds(50));
  dns.Answer(std::vector<std::string>{"127.0.0.1", "10.0.0.1"});
  d.RefreshAll();
  EXPECT_EQ(ListedNames(pool), (std::vector<std::string>{"http://127.0.0.1:9", "http://10.0.0.1:9"}));
  EXPECT_EQ(pool.replicas[0]->dns_entry(), -1);
  dns.answers.erase("replicas.test");
  d.RefreshAll();
  EXPECT_EQ(ListedNames(pool), (std::vector<std::string>{"http://127.0.0.1:9"}));
}

// The thread resolves again on its own; Stop joins it.
TEST(DiscoveryTest, RefreshesOnItsOwnThread) {
  Router router({DnsPool()}, std::make_unique<LeastOutstandingTokens>());
  Script dns;
  std::mutex mu;
  std::vector<std::string> joined;
  ReplicaDiscovery::Hooks hooks{[&](Replica* r) {
                                  std::lock_guard<std::mutex> lock(mu);
                                  joined.push_back(r->name());
                                },
                                {}};
  dns.Answer(std::vector<std::string>{"10.0.0.7"});
  ReplicaDiscovery d(&router, dns.resolver(), hooks, std::chrono::milliseconds(10));
  d.Start();
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!joined.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  d.Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(joined, (std::vector<std::string>{"http://10.0.0.7:8000"}));
}

TEST(DiscoveryTest, SystemResolverAnswersForLoopbackAndRefusesUnknownNames) {
  auto resolve = ReplicaDiscovery::SystemResolver();
  auto lit = resolve("127.0.0.1");
  ASSERT_TRUE(lit.ok()) << lit.status().ToString();
  EXPECT_EQ(*lit, std::vector<std::string>{"127.0.0.1"});
  auto v6 = resolve("::1");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(*v6, std::vector<std::string>{"::1"});
  // RFC 6761: .invalid names never resolve. NotFound, or a failed lookup
  // on a machine without a resolver; never an address.
  auto bad = resolve("no-such-replica.invalid");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace kvs::gateway
