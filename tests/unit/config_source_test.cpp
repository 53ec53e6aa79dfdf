// The snapshot a worker serves new requests under: the published one, re-read only after a
// publish; a snapshot a request holds stays alive and unchanged after the next publish.

#include <gtest/gtest.h>

#include "floodgate/config/config_source.hpp"
#include "floodgate/config/loader.hpp"

namespace {

using namespace floodgate;

config::ConfigPtr load(const std::string& pop) {
  auto r = config::load_config_text(
      "server: { listen: 127.0.0.1:8080, pop: " + pop +
          " }\nupstreams: { origin: { url: \"http://127.0.0.1:9000\" } }\n"
          "routes: [{ name: all, match: { path_prefix: / }, upstream: origin }]\n",
      "test.yaml", config::process_env());
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  return r.config;
}

TEST(SnapshotCache, HandsOutThePublishedSnapshotAndFollowsEveryPublish) {
  config::ConfigSource source(load("one"));
  config::SnapshotCache cache(source);
  auto a = cache.get();
  auto b = cache.get();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->server.pop, "one");
  source.publish(load("two"));
  auto c = cache.get();
  EXPECT_EQ(c->server.pop, "two");
  EXPECT_EQ(c.get(), source.get().get());
  // What a request took before the publish is still the old snapshot, alive.
  EXPECT_EQ(a->server.pop, "one");
  a.reset();
  b.reset();
  source.publish(load("three"));
  EXPECT_EQ(cache.get()->server.pop, "three");
}

}  // namespace
