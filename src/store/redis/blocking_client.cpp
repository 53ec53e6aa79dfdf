#include "floodgate/store/redis_blocking_client.hpp"

#include <boost/asio/io_context.hpp>
#include <map>

#include "redis_connection.hpp"

namespace floodgate::store {

namespace {
// The nodes one client keeps a connection to: the overrides' node, and the few a cluster's
// MOVED has named. Past this, the least recently added goes (its next use reconnects).
constexpr std::size_t kMaxConnections = 16;
}  // namespace

struct RedisBlockingClient::Impl {
  Impl(RedisAccess a, spdlog::logger& l, std::chrono::milliseconds t)
      : access(std::move(a)), log(l), connect_timeout(t) {}
  // Declared first, destroyed last: the connections' timers and sockets belong to it.
  boost::asio::io_context ioc;
  RedisAccess access;
  spdlog::logger& log;
  std::chrono::milliseconds connect_timeout;
  std::map<std::string, std::shared_ptr<redis::Connection>> connections;
  std::vector<std::string> added;  // connections' keys, oldest first

  // Runs the loop until `done` or `until`: false when the time ran out.
  template <class Done>
  bool run_until(Done done, std::chrono::steady_clock::time_point until) {
    ioc.restart();
    while (!done()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) return false;
      ioc.run_one_for(until - now);
    }
    return true;
  }

  // A connected connection to host:port, or null with `why`.
  std::shared_ptr<redis::Connection> connect(const std::string& host, std::uint16_t port,
                                             std::string& why) {
    const auto key = host + ":" + std::to_string(port);
    // Others that are down (a master gone in a failover, a node that closed an idle
    // connection) stop here, so they do not reconnect in the background whenever the loop
    // runs; their next use starts afresh.
    for (auto& [k, other] : connections)
      if (k != key && other && !other->connected()) other->stop();
    auto& conn = connections[key];
    if (conn && conn->connected()) return conn;
    if (conn) {
      conn->stop();  // down: a fresh connection connects at once, with no backoff to wait out
    } else {
      added.push_back(key);
    }
    redis::ConnectionOptions o;
    o.host = host;
    o.port = port;
    o.access = access;
    o.connect_timeout = connect_timeout;
    conn = std::make_shared<redis::Connection>(ioc, o, log);
    conn->start();
    auto c = conn;  // `conn` is a reference into the map, which eviction below changes
    if (added.size() > kMaxConnections) {
      connections[added.front()]->stop();
      connections.erase(added.front());
      added.erase(added.begin());
    }
    // The connect timeout ends a failed attempt (with its reason), so a little past it suffices.
    if (run_until(
            [&] { return c->connected() || !c->last_error().empty(); },
            std::chrono::steady_clock::now() + connect_timeout + std::chrono::milliseconds(100)) &&
        c->connected())
      return c;
    why = key + ": " + (c->last_error().empty() ? "connect timed out" : c->last_error());
    c->stop();
    return nullptr;
  }
};

RedisBlockingClient::RedisBlockingClient(RedisAccess access, spdlog::logger& log,
                                         std::chrono::milliseconds connect_timeout)
    : impl_(std::make_unique<Impl>(std::move(access), log, connect_timeout)) {}

RedisBlockingClient::~RedisBlockingClient() {
  for (auto& [key, conn] : impl_->connections)
    if (conn) conn->stop();
}

RedisReply RedisBlockingClient::command(const std::string& host, std::uint16_t port,
                                        const std::vector<std::string>& args,
                                        std::chrono::milliseconds timeout, std::string& why) {
  auto conn = impl_->connect(host, port, why);
  if (!conn) return nullptr;
  std::vector<std::string_view> views(args.begin(), args.end());
  bool done = false;
  RedisReply reply;
  redis::CommandStatus status = redis::CommandStatus::disconnected;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (!conn->command(views, deadline, [&](const redisReply*, redis::CommandStatus s) {
        done = true;
        status = s;
        if (s == redis::CommandStatus::ok) reply = conn->take_reply();
      })) {
    why = host + ":" + std::to_string(port) + ": not connected";
    return nullptr;
  }
  // The connection's own deadline ends the command; the bound here is a backstop.
  try {
    impl_->run_until([&] { return done; }, deadline + std::chrono::seconds(1));
  } catch (...) {
    conn->stop();  // the callback refers to this frame: it runs now (disconnected), not later
    throw;
  }
  if (reply) return reply;
  why = host + ":" + std::to_string(port) + ": " +
        (status == redis::CommandStatus::timeout
             ? "no reply within " + std::to_string(timeout.count()) + " ms"
             : "the connection dropped (" + conn->last_error() + ")");
  conn->stop();  // a late reply must not answer the next command; the next use reconnects
  return nullptr;
}

}  // namespace floodgate::store
