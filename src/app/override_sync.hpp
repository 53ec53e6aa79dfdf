#pragma once
// Per-caller overrides kept in Redis, so that every instance sharing the store applies one set
// through the admin API of any of them: a hash `<prefix>:{overrides}` (field "LIMIT\nCALLER",
// value the override's JSON) and a counter `<prefix>:{overrides}:version` bumped by every
// change. Each instance reads the counter every half second and the hash when it moved, and
// publishes what it read to its OverrideBoard: a change reaches every instance within a
// second. A blocking client of its own (the workers' connection code, TLS included), used by
// the poller's thread and the admin thread (never a worker's), following a cluster's MOVED to
// the slot's owner.

#include <spdlog/logger.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/store/redis_blocking_client.hpp"

namespace floodgate::app {

class RedisOverrides final : public limit::OverrideKeeper {
 public:
  RedisOverrides(const config::StoreSettings& store, limit::OverrideBoard& board,
                 const limit::Clock& clock, std::shared_ptr<spdlog::logger> log);
  ~RedisOverrides() override;
  RedisOverrides(const RedisOverrides&) = delete;
  RedisOverrides& operator=(const RedisOverrides&) = delete;

  // Reads the overrides on a thread of its own, at once and then every `every` (a store down
  // at start leaves the board empty until it is back).
  void start(std::chrono::milliseconds every = std::chrono::milliseconds(500));

  std::string put(const limit::CallerOverride& o) override;
  std::string remove(const std::string& limit, const std::string& caller, bool& found) override;
  std::string reset(const std::string& store_key) override;

 private:
  using Reply = store::RedisReply;
  // One command on the overrides' node; null with `why` on failure.
  Reply command(const std::vector<std::string>& argv, std::string& why);
  // Deletes each (field, value) of `hash` whose value is still the one read: a PUT of an
  // override (or a new reset) between the read and the delete is kept.
  void delete_unchanged(const std::string& hash,
                        const std::vector<std::pair<std::string, std::string>>& fields);
  // With Sentinel: the master as the first sentinel that knows names it.
  std::optional<config::Endpoint> master(std::string& why);
  // Reads the hash when the version moved (or `force`) and publishes it. Under mutex_.
  bool refresh(bool force, std::string& why);
  void poll(std::chrono::milliseconds every);

  config::StoreSettings store_;
  limit::OverrideBoard& board_;
  const limit::Clock& clock_;
  std::shared_ptr<spdlog::logger> log_;
  std::string hash_;
  std::string version_key_;
  std::string resets_;  // store key -> when it was reset (ms); kept 10 minutes
  std::mutex mutex_;
  store::RedisBlockingClient client_;                    // under mutex_
  std::optional<store::RedisBlockingClient> sentinels_;  // with Sentinel: asked for the master
  std::optional<config::Endpoint> at_;  // the node that answered last (a cluster's may move)
  std::string seen_;                    // the version last read ("" before any)
  bool failing_ = false;
  bool stop_ = false;
  std::condition_variable wake_;
  std::thread poller_;
};

}  // namespace floodgate::app
