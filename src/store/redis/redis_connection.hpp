#pragma once
// One connection to a Redis server, driven by a worker's Asio event loop: the socket is ours
// (Asio), plain TCP or TLS (an OpenSSL stream over it), and hiredis only parses the replies
// (its redisReader, bounded by reply_limits.hpp).
//
// Deadlines are ours: every command carries one, a single steady_timer is always armed at the
// earliest deadline still pending (a command with an earlier deadline than the armed one
// re-arms it), and a reply that arrives after its command timed out is dropped. Replies are
// matched to commands in order (Redis answers in order); a reply with no command waiting is a
// protocol fault that drops the connection. Commands issued in one loop turn are written
// together at the end of the turn (pipelining). Handlers hold the attempt they belong to (its
// socket and reader) and a weak_ptr to the connection, so neither a dropped attempt nor a
// destroyed connection is touched by a late handler. Whatever a callback throws is rethrown
// from a plain handler of the event loop, where the worker logs and counts it.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/store/redis_reply.hpp"
#include "floodgate/store/redis_store.hpp"
#include "node_address.hpp"

namespace spdlog {
class logger;
}

namespace floodgate::store::redis {

// Where a master is, or why not: the answer to a locate call (Sentinel).
using Located = std::function<void(std::optional<NodeAddress> at, const std::string& why)>;

struct ConnectionOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  // Sentinel: asked before every attempt where the master is (host and port above are then
  // only the last answer), and ROLE must say "master" before the connection takes commands;
  // a READONLY error (a master demoted under us) drops it, so the next attempt asks again.
  std::function<void(Located)> locate;
  std::string master_name;  // for the log, with locate
  RedisAccess access;       // AUTH, and TLS when access.tls is set
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds max_backoff{1000};
};

enum class CommandStatus { ok, timeout, disconnected };

// `args` as one RESP command (an array of bulk strings), appended to `out`: what hiredis's
// redisFormatCommandArgv writes, without its printf-style formatting (a tenth of a Redis
// decision's CPU in the proxy) or an allocation per command.
void append_command(std::string& out, const std::vector<std::string_view>& args);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Called exactly once per command: with the reply (ok) or with null (timeout, disconnected).
  // The reply lives until the callback returns, unless the callback takes it (take_reply).
  using Callback = std::function<void(const redisReply* reply, CommandStatus status)>;

  Connection(boost::asio::io_context& ioc, ConnectionOptions options, spdlog::logger& log);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();  // connects, and reconnects with backoff whenever the connection drops
  void stop();   // disconnects for good; pending commands complete as disconnected
  // Up and ready for commands: TCP connected, and the TLS handshake done when TLS is on.
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  // Why the last attempt ended or failed ("" before any failure): for callers that report it.
  const std::string& last_error() const { return last_error_; }
  std::string name() const;  // "host:port" (with locate: "NAME at host:port"), for logs
  // Inside a Callback given a reply: keeps the reply beyond the callback (null elsewhere).
  RedisReply take_reply() { return std::move(current_); }

  // Sends a command; false (and no callback) when not connected.
  bool command(const std::vector<std::string_view>& args,
               std::chrono::steady_clock::time_point deadline, Callback done);
  // Drops the connection (pending commands fail) and reconnects: used when a server stops
  // answering, so replies stuck behind a hung server are not waited for.
  void reset();

 private:
  struct Pending {
    Callback done;
    std::chrono::steady_clock::time_point deadline;
    bool finished = false;
  };
  struct Attempt;  // one connection attempt: its socket, reader and buffers
  using AttemptPtr = std::shared_ptr<Attempt>;

  void connect();
  void on_connected(const AttemptPtr& a);
  void handshake(const AttemptPtr& a);  // TLS: then on_ready
  void dial(const AttemptPtr& a);       // resolve (a name) and connect to options_.host:port
  void on_ready(const AttemptPtr& a);
  void verify_master(const AttemptPtr& a);  // ROLE, then mark_connected
  void mark_connected(const AttemptPtr& a);
  void read(const AttemptPtr& a);
  void on_read(const AttemptPtr& a, const boost::system::error_code& ec, std::size_t n);
  void write(const AttemptPtr& a);
  void flush_soon();
  // Ends the attempt in use (if any): its pending commands complete as disconnected, and a
  // reconnect is scheduled unless stopped. `why` is logged when not empty.
  void drop(const std::string& why);
  void schedule_reconnect();
  void arm_timer();  // at the earliest pending deadline (a full scan)
  void arm_timer_for(std::chrono::steady_clock::time_point deadline);  // one more deadline
  void on_timer();
  // Runs a command's callback; an exception is handed to the event loop (see above).
  void deliver(Callback& done, const redisReply* reply, CommandStatus status) noexcept;

  boost::asio::io_context& ioc_;
  ConnectionOptions options_;
  spdlog::logger& log_;
  AttemptPtr attempt_;            // null between attempts (and once stopped)
  std::uint64_t generation_ = 0;  // one per attempt: timers of an earlier one ignore themselves
  std::atomic<bool> connected_{false};  // read by the admin thread (health)
  bool stopped_ = false;
  bool flush_posted_ = false;
  int dropping_ = 0;  // drop()s under way: a reset from a callback of one schedules nothing
  std::chrono::milliseconds backoff_{50};
  std::deque<Pending> pending_;  // Redis answers in order: front = next reply
  std::string out_;              // commands formatted and not yet handed to a write
  RedisReply current_;           // the reply being delivered (take_reply)
  std::string last_error_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer connect_timer_;
  bool timer_armed_ = false;
  std::chrono::steady_clock::time_point armed_for_{};  // the armed timer's expiry
  std::uint64_t timer_generation_ = 0;  // a wait superseded by an earlier deadline ignores itself
};

}  // namespace floodgate::store::redis
