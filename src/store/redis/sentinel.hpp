#pragma once
// Where the master is, by asking Redis Sentinel: one connection per sentinel on the worker's
// loop, and `SENTINEL GET-MASTER-ADDR-BY-NAME` asked before every connect to the master (the
// client rule Sentinel's docs give: re-query on every reconnection). The first sentinel that
// answers with a valid address wins and is asked first next time; one that is down, does not
// know the name, stalls or answers something that is not an address is skipped.

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node_address.hpp"
#include "redis_connection.hpp"

namespace floodgate::store::redis {

class SentinelLocator : public std::enable_shared_from_this<SentinelLocator> {
 public:
  using Found = Located;
  // How long one sentinel has to answer before the next is asked.
  static constexpr std::chrono::milliseconds kAskTimeout{300};

  // `sentinels` as "host:port" (checked by the config; one that does not parse is skipped).
  static std::shared_ptr<SentinelLocator> make(boost::asio::io_context& ioc,
                                               const std::vector<std::string>& sentinels,
                                               std::string master_name, RedisAccess access,
                                               spdlog::logger& log);
  SentinelLocator(boost::asio::io_context& ioc, std::vector<NodeAddress> sentinels,
                  std::string master_name, RedisAccess access, std::chrono::milliseconds timeout,
                  spdlog::logger& log);
  ~SentinelLocator();
  SentinelLocator(const SentinelLocator&) = delete;
  SentinelLocator& operator=(const SentinelLocator&) = delete;

  void start();  // connects to every sentinel (and keeps reconnecting)
  void stop();
  // Asks the sentinels in turn; `found` is called once, never from within this call.
  void locate(Found found);

 private:
  void first_ask(std::shared_ptr<Found> found, std::chrono::steady_clock::time_point until);
  void ask(std::size_t i, std::shared_ptr<Found> found, std::string why);

  boost::asio::io_context& ioc_;
  std::string master_name_;
  std::chrono::milliseconds timeout_;
  std::vector<std::shared_ptr<Connection>> sentinels_;  // in the order to ask them
};

}  // namespace floodgate::store::redis
