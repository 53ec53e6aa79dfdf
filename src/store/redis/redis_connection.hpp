#pragma once
// One hiredis async connection driven by a worker's Asio event loop.
//
// hiredis 0.14 has no timer hook and no async timeout, so deadlines are ours: every command
// carries one, a single steady_timer is always armed at the earliest deadline still pending
// (a command with an earlier deadline than the armed one re-arms it), and a reply that arrives
// after its command timed out is dropped. The fd belongs to hiredis: we wait on it through a
// posix::stream_descriptor that is released (never closed) when hiredis cleans up. Pending
// waits hold a weak_ptr, so a connection destroyed meanwhile is never touched. Commands issued
// in one loop turn are written together when the fd next becomes writable (pipelining).
// Nothing thrown by a callback crosses hiredis's C frames: it is caught there and rethrown from
// a plain handler of the event loop, where the worker logs and counts it.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct redisAsyncContext;
struct redisReply;

namespace spdlog {
class logger;
}

namespace floodgate::store::redis {

struct ConnectionOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string username;  // ACL user (Redis 6+); empty: AUTH with the password alone
  std::string password;  // empty: no AUTH
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
  using Callback = std::function<void(const redisReply* reply, CommandStatus status)>;

  Connection(boost::asio::io_context& ioc, ConnectionOptions options, spdlog::logger& log);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void start();  // connects, and reconnects with backoff whenever the connection drops
  void stop();   // disconnects for good; pending commands complete as disconnected
  bool connected() const { return connected_.load(std::memory_order_relaxed); }

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

  void connect();
  void schedule_reconnect();
  void arm_timer();  // at the earliest pending deadline (a full scan)
  void arm_timer_for(std::chrono::steady_clock::time_point deadline);  // one more deadline
  void on_timer();
  // Runs a command's callback; an exception is handed to the event loop (see above).
  void deliver(Callback& done, const redisReply* reply, CommandStatus status);
  // The body of every callback hiredis calls: whatever it throws goes to the event loop.
  template <typename F>
  void at_c_boundary(F&& body) noexcept;
  void wait_readable();
  void wait_writable();
  void flush_soon();
  void wait(boost::asio::posix::stream_descriptor::wait_type type);
  void teardown_fd();

  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_disconnect(const redisAsyncContext* ac, int status);
  static void hook_add_read(void* privdata);
  static void hook_del_read(void* privdata);
  static void hook_add_write(void* privdata);
  static void hook_del_write(void* privdata);
  static void hook_cleanup(void* privdata);

  boost::asio::io_context& ioc_;
  ConnectionOptions options_;
  spdlog::logger& log_;
  redisAsyncContext* ac_ = nullptr;  // owned by hiredis; null once hiredis has freed it
  boost::asio::posix::stream_descriptor fd_;
  std::uint64_t generation_ = 0;  // one per connection attempt: stale waits ignore themselves
  bool want_read_ = false, want_write_ = false;
  bool read_waiting_ = false, write_waiting_ = false;
  bool flush_posted_ = false, flushing_ = false;
  std::atomic<bool> connected_{false};  // read by the admin thread (health)
  bool stopped_ = false;
  std::chrono::milliseconds backoff_{50};
  std::deque<Pending> pending_;  // hiredis answers in order: front = next reply
  std::string wire_;             // a command being formatted (hiredis copies it): reused
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer connect_timer_;
  bool timer_armed_ = false;
  std::chrono::steady_clock::time_point armed_for_{};  // the armed timer's expiry
  std::uint64_t timer_generation_ = 0;  // a wait superseded by an earlier deadline ignores itself
};

}  // namespace floodgate::store::redis
