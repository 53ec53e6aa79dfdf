// config_source on the real binary (issue 39 item 1, SPEC "Fleet configuration"): a config
// published on an HTTPS server the test starts, signed with openssl's CLI as
// docs/configuration.md shows, picked up by two running instances (one polling every second,
// one asked by SIGHUP); a bad signature, a stale version, an invalid config and the server
// down each change nothing and are counted; a start with the url down serves the cache, and
// without a cache does not start.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "floodgate_process.hpp"
#include "harness.hpp"
#include "https_files.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// The publishing side: an Ed25519 key pair made by openssl, and each document signed by it.
struct Publisher {
  HttpsFiles& server;
  std::string dir =
      (server.dir().parent_path() / ("floodgate-publisher-" + std::to_string(::getpid()) + "-" +
                                     std::to_string(reinterpret_cast<std::uintptr_t>(this))))
          .string();
  std::string key = dir + "/signing.pem", pub = dir + "/signing.pub";

  explicit Publisher(HttpsFiles& s) : server(s) {
    std::filesystem::create_directories(dir);
    command_output("openssl genpkey -algorithm ed25519 -out " + key + " && openssl pkey -in " +
                       key + " -pubout -out " + pub,
                   20);
  }
  ~Publisher() { std::filesystem::remove_all(dir); }
  // Signs `doc` with `with` (this publisher's key unless given) and publishes both, the
  // signature first: a poll in between sees the old document with the new signature, a bad
  // signature that the next poll mends.
  void publish(const std::string& doc, const std::string& with = "") {
    const auto path = dir + "/fra1.yaml";
    std::ofstream(path, std::ios::binary) << doc;
    command_output("openssl pkeyutl -sign -rawin -inkey " + (with.empty() ? key : with) + " -in " +
                       path + " -out " + path + ".sig",
                   20);
    std::ifstream sig(path + ".sig", std::ios::binary);
    server.publish("fra1.yaml.sig", std::string(std::istreambuf_iterator<char>(sig), {}));
    server.publish("fra1.yaml", doc);
  }
};

// The fleet's config, version `version`: each instance's ports from its environment.
std::string fleet_doc(int version, int limit, std::uint16_t origin) {
  return "version: " + std::to_string(version) +
         "\nserver: { listen: [\"127.0.0.1:${FG_PORT}\"], threads: 1 }\n"
         "admin: { listen: \"127.0.0.1:${FG_ADMIN}\" }\n"
         "upstreams: { origin: { url: \"http://127.0.0.1:" +
         std::to_string(origin) +
         "\" } }\nstore: { key_secret: fleet-test-secret-0123456789 }\nroutes:\n  - name: api\n"
         "    match: { path_prefix: / }\n    upstream: origin\n"
         "    limits: [{ name: l, algorithm: fixed_window, limit: " +
         std::to_string(limit) + ", window: 1h, key: [ip] }]\n";
}

// One instance: its local file (config_source only) and its ports.
struct FleetInstance {
  std::string name;
  std::uint16_t port = free_port(), admin = free_port();
  std::unique_ptr<ChildProcess> process;
  std::string seen;

  void start(const std::string& local_yaml) {
    const auto path = write_temp_file("feed-" + name, local_yaml);
    // Its log (stderr) on the pipe the test reads, as start_floodgate does.
    process = std::make_unique<ChildProcess>(std::vector<std::string>{
        "/bin/sh", "-c",
        "exec env FG_PORT=" + std::to_string(port) + " FG_ADMIN=" + std::to_string(admin) +
            " \"$0\" --config \"$1\" 2>&1",
        floodgate_binary(), path});
  }
  std::string metrics() const {
    return command_output("curl -s http://127.0.0.1:" + std::to_string(admin) + "/metrics", 20);
  }
  std::uint64_t updates(const std::string& result) const {
    return metric(metrics(), "floodgate_config_updates_total{result=\"" + result + "\"}");
  }
  bool serves_version(int v) const {
    return metrics().find("floodgate_config_info{version=\"" + std::to_string(v) + "\",") !=
           std::string::npos;
  }
  int status(const std::string& target) const {
    auto r = get(port, target);
    return r ? r->result_int() : -1;
  }
};

std::string local_yaml(const HttpsFiles& server, const Publisher& p, const TestPki& pki,
                       const std::string& poll, const std::string& cache) {
  // A key in the query, as a CDN or an object store may want: the signature is fetched at
  // /fleet/fra1.yaml.sig?token=..., the query kept.
  return "config_source:\n  url: " + server.url("/fleet/fra1.yaml?token=k3y") +
         "\n  poll: " + poll + "\n  public_key: " + p.pub +
         (cache.empty() ? "" : "\n  cache: " + cache) + "\n  ca_file: " + pki.ca_file() + "\n";
}

TEST(ConfigFeed, AFleetAppliesASignedConfigAndRefusesEveryBadOne) {
  TestPki pki;
  HttpsFiles server(pki);
  Publisher publisher(server);
  Publisher stranger(server);  // a key the instances do not trust
  Origin origin;
  publisher.publish(fleet_doc(1, 100, origin.port()));
  const auto cache_dir =
      server.dir().parent_path() / ("floodgate-feed-cache-" + std::to_string(::getpid()));
  std::filesystem::create_directories(cache_dir);
  const auto cache = (cache_dir / "last-good.yaml").string();

  // a polls every second; b every hour, and is asked by SIGHUP.
  FleetInstance a{"a"}, b{"b"};
  a.start(local_yaml(server, publisher, pki, "1s", ""));
  b.start(local_yaml(server, publisher, pki, "1h", cache));
  wait_serving(a.admin, "/healthz");
  wait_serving(b.admin, "/healthz");
  for (auto* i : {&a, &b}) {
    EXPECT_TRUE(i->serves_version(1)) << i->name << "\n" << i->metrics();
    EXPECT_EQ(i->updates("applied"), 1u) << i->name;
    EXPECT_EQ(i->status("/x"), 200);
    EXPECT_EQ(i->status("/x"), 200);
  }
  EXPECT_TRUE(std::filesystem::exists(cache)) << "the cache is written at start";

  // Version 2: a limit of 3 an hour per client (the 2 requests above counted: the limits'
  // state outlives a new config, as it outlives a reload).
  publisher.publish(fleet_doc(2, 3, origin.port()));
  ::kill(b.process->pid(), SIGHUP);
  for (auto* i : {&a, &b}) {
    EXPECT_TRUE(eventually([&] { return i->serves_version(2); }, 10s)) << i->name;
    EXPECT_EQ(i->updates("applied"), 2u) << i->name;
    EXPECT_EQ(i->status("/y"), 200) << i->name;
    EXPECT_EQ(i->status("/y"), 429) << i->name;
  }
  // Unchanged: a answers its polls with a 304 (If-None-Match).
  EXPECT_TRUE(eventually([&] { return a.updates("unchanged") >= 2; }, 10s));

  // Each bad document is counted and refused, by both; version 2 keeps serving.
  struct Bad {
    std::string what, doc, key;
  };
  auto invalid = fleet_doc(4, 3, origin.port());
  invalid.replace(invalid.find("upstream: origin"), 16, "upstream: nowhere");
  for (const auto& bad :
       {Bad{"bad_signature", fleet_doc(3, 1000, origin.port()), stranger.key},
        Bad{"stale_version", fleet_doc(2, 1000, origin.port()), ""}, Bad{"invalid", invalid, ""}}) {
    const auto before_a = a.updates(bad.what), before_b = b.updates(bad.what);
    publisher.publish(bad.doc, bad.key);
    ::kill(b.process->pid(), SIGHUP);
    EXPECT_TRUE(eventually([&] { return a.updates(bad.what) > before_a; }, 10s)) << bad.what;
    EXPECT_TRUE(eventually([&] { return b.updates(bad.what) > before_b; }, 10s)) << bad.what;
    for (auto* i : {&a, &b}) {
      EXPECT_TRUE(i->serves_version(2)) << bad.what << " " << i->name;
      EXPECT_EQ(i->status("/y"), 429) << bad.what << " " << i->name;
    }
  }
  EXPECT_EQ(a.updates("applied"), 2u);
  std::string line = wait_for_line(*b.process, "no upstream named \"nowhere\"", 5s, b.seen);
  EXPECT_NE(line.find("fra1.yaml?token=***:9:15: "), std::string::npos) << b.seen;

  // The server down: a fetch error, counted; version 2 serves on.
  server.down(true);
  const auto errors = b.updates("fetch_error");
  ::kill(b.process->pid(), SIGHUP);
  EXPECT_TRUE(eventually([&] { return b.updates("fetch_error") > errors; }, 10s));
  EXPECT_TRUE(b.serves_version(2));

  // A restart with the url down serves the cache (version 2); with no cache, no start.
  EXPECT_EQ(b.process->signal_and_wait(SIGTERM, 10s), 0);
  FleetInstance c{"c", b.port, b.admin};
  c.start(local_yaml(server, publisher, pki, "1h", cache));
  wait_serving(c.admin, "/healthz");
  EXPECT_TRUE(c.serves_version(2));
  EXPECT_EQ(c.updates("fetch_error"), 1u);
  EXPECT_NE(wait_for_line(*c.process, "serving the cached config, version 2", 5s, c.seen), "")
      << c.seen;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.status("/z"), 200) << i;  // a new process: 3 again
  EXPECT_EQ(c.status("/z"), 429);

  FleetInstance d{"d"};
  d.start(local_yaml(server, publisher, pki, "1h", ""));
  EXPECT_NE(wait_for_line(*d.process, "nothing to serve", 15s, d.seen), "") << d.seen;
  EXPECT_EQ(d.process->signal_and_wait(0, 10s), 1) << d.seen;
  std::filesystem::remove_all(cache_dir);
}

}  // namespace
}  // namespace floodgate::testing
