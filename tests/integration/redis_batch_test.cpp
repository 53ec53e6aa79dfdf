// How decisions reach a real redis-server: the requests a worker has waiting in one loop turn
// go as one call of the function library, each decided on its own (its own all-or-nothing, its
// own answer, an error in its decision its own); a library Redis lost is loaded again within
// the decision; a user whose ACL does not allow functions is served by the same code as
// scripts.
#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "floodgate/store/redis_store.hpp"
#include "redis_server.hpp"

namespace floodgate::testing {
namespace {

using config::Algorithm;

// How often Redis has run `command` since its last CONFIG RESETSTAT (INFO commandstats).
std::int64_t calls_of(const RedisServer& redis, const std::string& command) {
  auto stats = redis.cli("INFO commandstats");
  auto at = stats.find("cmdstat_" + command + ":calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(stats.substr(at + command.size() + 15));
}

store::Item bucket(const std::string& name, std::int64_t capacity) {
  store::Item i;
  i.key = "rl:batch:" + name + ":{" + name + "}";
  i.params.algorithm = Algorithm::token_bucket;
  i.params.capacity = capacity;
  i.params.per_second = 1.0 / 3600;  // nothing comes back during the test
  return i;
}

class Batch : public ::testing::Test {
 protected:
  void start(const std::string& username = "", const std::string& password = "") {
    log_ = std::make_shared<spdlog::logger>("batch",
                                            std::make_shared<spdlog::sinks::stderr_sink_mt>());
    log_->set_level(spdlog::level::err);
    store::RedisStoreOptions o;
    o.port = redis.port();
    o.access.username = username;
    o.access.password = password;
    o.timeout = std::chrono::milliseconds(2000);
    o.instance_id = "batch";
    store_ = store::make_redis_store(ioc_, o, *log_);
    for (int i = 0; i < 200 && !store_->healthy(); ++i) run(std::chrono::milliseconds(10));
    ASSERT_TRUE(store_->healthy());
  }

  // Sends every request before the loop runs (one loop turn), then runs it until all answered.
  std::vector<store::AcquireResult> decide(std::vector<std::vector<store::Item>> requests) {
    std::vector<std::optional<store::AcquireResult>> results(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i)
      store_->acquire(std::move(requests[i]),
                      [&results, i](store::AcquireResult r) { results[i] = std::move(r); });
    auto done = [&] {
      for (const auto& r : results)
        if (!r) return false;
      return true;
    };
    for (int i = 0; i < 500 && !done(); ++i) run(std::chrono::milliseconds(10));
    std::vector<store::AcquireResult> out;
    for (auto& r : results) out.push_back(r ? std::move(*r) : store::StoreError::timeout);
    return out;
  }

  void run(std::chrono::milliseconds d) {
    ioc_.restart();
    ioc_.run_for(d);
  }

  RedisServer redis;

 private:
  asio::io_context ioc_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<store::LimitStore> store_;
};

const store::Outcome& outcome(const store::AcquireResult& r) {
  static const store::Outcome none;
  const auto* o = std::get_if<store::Outcome>(&r);
  EXPECT_TRUE(o) << "a store error where a decision belongs";
  return o ? *o : none;
}

TEST_F(Batch, RequestsOfOneLoopTurnGoAsOneCallEachDecidedOnItsOwn) {
  start();
  decide({{bucket("warm", 1)}});  // loads the library
  redis.cli("CONFIG RESETSTAT");
  // Six requests for a bucket of 5, then one that also needs a second bucket: refused by the
  // first, so the second is not charged; then one for the second bucket alone.
  std::vector<std::vector<store::Item>> requests(6, {bucket("a", 5)});
  requests.push_back({bucket("a", 5), bucket("b", 10)});
  requests.push_back({bucket("b", 10)});
  auto results = decide(requests);
  ASSERT_EQ(results.size(), 8u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(outcome(results[i]).admitted) << i;
    EXPECT_EQ(outcome(results[i]).decisions[0].remaining, 4 - i) << i;
  }
  EXPECT_FALSE(outcome(results[5]).admitted);
  const auto& both = outcome(results[6]);
  EXPECT_FALSE(both.admitted);
  ASSERT_EQ(both.decisions.size(), 2u);
  EXPECT_TRUE(both.decisions[1].admitted);                   // b alone would have passed...
  EXPECT_EQ(outcome(results[7]).decisions[0].remaining, 9);  // ...and was not charged
  EXPECT_EQ(calls_of(redis, "fcall"), 1) << "eight requests, one call";
}

TEST_F(Batch, AKeyOfAnotherTypeFailsOnlyItsOwnRequest) {
  start();
  redis.cli("SADD 'rl:batch:x:{x}' member");
  auto results = decide({{bucket("a", 5)}, {bucket("x", 5)}, {bucket("a", 5)}});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(outcome(results[0]).decisions[0].remaining, 4);
  EXPECT_EQ(std::get_if<store::StoreError>(&results[1]) != nullptr, true);
  EXPECT_EQ(outcome(results[2]).decisions[0].remaining, 3);
}

TEST_F(Batch, ALibraryRedisLostIsLoadedAgainWithinTheDecision) {
  start();
  EXPECT_TRUE(outcome(decide({{bucket("a", 5)}})[0]).admitted);
  redis.cli("FUNCTION FLUSH");
  redis.cli("CONFIG RESETSTAT");
  EXPECT_EQ(outcome(decide({{bucket("a", 5)}})[0]).decisions[0].remaining, 3);
  EXPECT_EQ(calls_of(redis, "function|load"), 1);
  EXPECT_EQ(calls_of(redis, "fcall"), 2);  // "Function not found", then behind the load
}

TEST_F(Batch, AUserWithoutFunctionsIsServedByScripts) {
  redis.cli("ACL SETUSER scripts-only on '>secret' '~*' '&*' +@all -fcall -fcall_ro -function");
  start("scripts-only", "secret");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(outcome(decide({{bucket("a", 5)}})[0]).decisions[0].remaining, 4 - i) << i;
  EXPECT_GE(calls_of(redis, "evalsha") + calls_of(redis, "eval"), 3);
  // Told once that functions are not allowed, it does not ask again.
  redis.cli("CONFIG RESETSTAT");
  decide({{bucket("a", 5)}});
  EXPECT_EQ(calls_of(redis, "fcall"), 0);
  EXPECT_EQ(calls_of(redis, "evalsha"), 1);
}

}  // namespace
}  // namespace floodgate::testing
