#include "redis_connection.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/logger.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <exception>
#include <optional>

#include "floodgate/tls/contexts.hpp"
#include "reply_limits.hpp"

namespace floodgate::store::redis {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Connection::Attempt {
  explicit Attempt(asio::io_context& ioc, std::uint64_t gen)
      : socket(ioc), resolver(ioc), generation(gen) {}
  ~Attempt() {
    if (reader) redisReaderFree(reader);
  }
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  tcp::socket socket;
  std::optional<asio::ssl::stream<tcp::socket&>> tls;  // over `socket` when TLS is on
  tcp::resolver resolver;
  std::uint64_t generation;
  redisReader* reader = nullptr;  // hiredis's parser, fed what the socket reads
  std::array<char, 16384> in;
  std::string sending;  // what the write in flight sends
  bool writing = false;
  bool up = false;  // connected (and TLS done): writes may go, even before connected_
};

}  // namespace floodgate::store::redis

void floodgate::store::RedisReplyFree::operator()(redisReply* r) const {
  freeReplyObject(r);
}

namespace floodgate::store::redis {

Connection::Connection(asio::io_context& ioc, ConnectionOptions options, spdlog::logger& log)
    : ioc_(ioc),
      options_(std::move(options)),
      log_(log),
      deadline_timer_(ioc),
      reconnect_timer_(ioc),
      connect_timer_(ioc) {}

Connection::~Connection() {
  stopped_ = true;
  drop("");  // every pending callback runs (as disconnected)
}

void Connection::start() {
  connect();
}

void Connection::stop() {
  stopped_ = true;
  reconnect_timer_.cancel();
  connect_timer_.cancel();
  deadline_timer_.cancel();
  drop("");
}

void Connection::reset() {
  drop("");
}

std::string Connection::name() const {
  auto at = options_.host + ":" + std::to_string(options_.port);
  return options_.locate ? options_.master_name + " at " + at : at;
}

void Connection::connect() {
  if (stopped_ || attempt_) return;
  auto a = std::make_shared<Attempt>(ioc_, ++generation_);
  a->reader = redisReaderCreate();
  if (!a->reader) {
    log_.warn("redis {}: connect failed: out of memory", name());
    schedule_reconnect();
    return;
  }
  limit_reply_sizes(a->reader);
  // AUTH goes first, ahead of any command: commands queued once the TCP connection is up are
  // pipelined behind it.
  if (!options_.access.password.empty()) {
    std::vector<std::string_view> auth{"AUTH"};
    if (!options_.access.username.empty()) auth.push_back(options_.access.username);
    auth.push_back(options_.access.password);
    append_command(out_, auth);
    pending_.push_back(
        {[this, gen = generation_](const redisReply* r, CommandStatus s) {
           if (s == CommandStatus::ok && r && r->type == REDIS_REPLY_ERROR && gen == generation_) {
             log_.error("redis {}: AUTH refused: {}", name(), std::string(r->str, r->len));
             asio::post(ioc_, [w = weak_from_this()] {
               if (auto self = w.lock()) self->reset();
             });
           }
         },
         Clock::now() + options_.connect_timeout});
    arm_timer_for(pending_.back().deadline);
  }
  attempt_ = a;  // from here on nothing throws before the connect is under way
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait(
      [w = weak_from_this(), gen = generation_](boost::system::error_code ec) {
        auto self = w.lock();
        if (ec || !self || !self->attempt_ || self->attempt_->generation != gen || self->connected_)
          return;
        self->drop("connect timed out");
      });
  if (!options_.locate) return dial(a);
  options_.locate([w = weak_from_this(), a](std::optional<NodeAddress> at, const std::string& why) {
    auto self = w.lock();
    if (!self || a != self->attempt_) return;
    if (!at) return self->drop("cannot locate the master: " + why);
    auto& o = self->options_;
    if (o.host != at->host || o.port != at->port)
      self->log_.info("redis {}: the sentinels name {}:{} as the master", o.master_name, at->host,
                      at->port);
    o.host = at->host;
    o.port = at->port;
    self->dial(a);
  });
}

void Connection::dial(const AttemptPtr& a) {
  auto on_connect = [w = weak_from_this(), a](const boost::system::error_code& ec, auto&&...) {
    auto self = w.lock();
    if (!self || a != self->attempt_) return;
    if (ec) return self->drop("connect failed: " + ec.message());
    self->on_connected(a);
  };
  // An address connects at once; a name is resolved by Asio's resolver (off the loop).
  boost::system::error_code bad_address;
  const auto address = asio::ip::make_address(options_.host, bad_address);
  if (!bad_address) {
    a->socket.async_connect(tcp::endpoint(address, options_.port), on_connect);
    return;
  }
  a->resolver.async_resolve(
      options_.host, std::to_string(options_.port),
      [w = weak_from_this(), a, on_connect](const boost::system::error_code& ec,
                                            const tcp::resolver::results_type& endpoints) {
        auto self = w.lock();
        if (!self || a != self->attempt_) return;
        if (ec) return self->drop("cannot resolve " + self->options_.host + ": " + ec.message());
        // IPv4 addresses first, as hiredis tried them: a host name with an unreachable IPv6
        // address must not spend the whole connect timeout on it.
        std::vector<tcp::endpoint> ordered(endpoints.begin(), endpoints.end());
        std::stable_partition(ordered.begin(), ordered.end(),
                              [](const tcp::endpoint& e) { return e.address().is_v4(); });
        asio::async_connect(a->socket, ordered, on_connect);
      });
}

void Connection::on_connected(const AttemptPtr& a) {
  boost::system::error_code ignored;
  a->socket.set_option(tcp::no_delay(true), ignored);
  if (options_.access.tls) return handshake(a);
  a->socket.non_blocking(true, ignored);  // write() tries a direct write first
  on_ready(a);
}

// Within the connect timeout, which covers the handshake too: a server that accepts and never
// answers TLS costs one timeout per attempt.
void Connection::handshake(const AttemptPtr& a) {
  const auto& name =
      options_.access.server_name.empty() ? options_.host : options_.access.server_name;
  SSL* ssl = tls::new_client_connection(options_.access.tls.get(), name);
  if (!ssl) return drop("TLS: out of memory");
  a->tls.emplace(a->socket, ssl);  // owns ssl from here
  a->tls->async_handshake(asio::ssl::stream_base::client, [w = weak_from_this(), a, name](
                                                              const boost::system::error_code& ec) {
    auto self = w.lock();
    if (!self || a != self->attempt_) return;
    if (!ec) return self->on_ready(a);
    auto why = tls::verify_failure(a->tls->native_handle());
    self->drop("TLS handshake with " + name +
               " failed: " + (why.empty() ? ec.message() : "certificate verify failed: " + why));
  });
}

void Connection::on_ready(const AttemptPtr& a) {
  a->up = true;
  read(a);
  if (options_.locate) return verify_master(a);
  mark_connected(a);
  if (!out_.empty()) flush_soon();  // AUTH, queued with the attempt
}

void Connection::mark_connected(const AttemptPtr& a) {
  connected_ = true;
  connect_timer_.cancel();
  log_.info("redis {}: connected{}", name(), a->tls ? " (TLS)" : "");
}

// A sentinel may name a master that has since become a replica (or a client may reach one
// during a failover): writes there would be refused, or worse, land on a node about to be
// resynced. So the node must say it is the master before any command is taken; until then
// the connection counts as not connected and decisions fail at once. An ACL user denied ROLE
// (it is in @dangerous) is let through with a warning: READONLY still catches a replica.
void Connection::verify_master(const AttemptPtr& a) {
  append_command(out_, {"ROLE"});  // behind AUTH, if any
  pending_.push_back({[this, a](const redisReply* r, CommandStatus s) {
                        if (s != CommandStatus::ok || a != attempt_) return;  // dropped anyway
                        if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                            r->element[0]->type == REDIS_REPLY_STRING &&
                            std::string_view(r->element[0]->str, r->element[0]->len) == "master")
                          return mark_connected(a);
                        if (r->type == REDIS_REPLY_ERROR &&
                            std::string_view(r->str, r->len).substr(0, 6) == "NOPERM") {
                          log_.warn(
                              "redis {}: the ACL user may not run ROLE (allow +role): the node "
                              "is taken as the master unverified",
                              name());
                          return mark_connected(a);
                        }
                        drop(r->type == REDIS_REPLY_ERROR
                                 ? "ROLE refused: " + std::string(r->str, r->len)
                                 : std::string("not the master; asking the sentinels again"));
                      },
                      Clock::now() + options_.connect_timeout});
  arm_timer_for(pending_.back().deadline);
  flush_soon();
}

void Connection::read(const AttemptPtr& a) {
  auto done = [w = weak_from_this(), a](const boost::system::error_code& ec, std::size_t n) {
    if (auto self = w.lock()) self->on_read(a, ec, n);
  };
  if (a->tls)
    a->tls->async_read_some(asio::buffer(a->in), std::move(done));
  else
    a->socket.async_read_some(asio::buffer(a->in), std::move(done));
}

void Connection::on_read(const AttemptPtr& a, const boost::system::error_code& ec, std::size_t n) {
  if (a != attempt_) return;  // a dropped attempt's read
  if (ec)
    return drop(ec == asio::error::eof || ec == asio::ssl::error::stream_truncated
                    ? "closed by the server"
                    : ec.message());
  if (redisReaderFeed(a->reader, a->in.data(), n) != REDIS_OK)
    return drop("cannot buffer a reply: out of memory");
  for (;;) {
    void* raw = nullptr;
    if (redisReaderGetReply(a->reader, &raw) != REDIS_OK)
      return drop(std::string("protocol error: ") + a->reader->errstr);
    if (!raw) break;
    RedisReply reply(static_cast<redisReply*>(raw));
    // hiredis's own async client aborts the process here (an assert): a server that answers
    // what nobody asked is broken or hostile, and its connection is dropped instead.
    if (pending_.empty()) return drop("protocol error: a reply to no command");
    auto p = std::move(pending_.front());
    pending_.pop_front();
    // A server that answers well is healthy again: the next drop reconnects quickly. (Not at
    // the TCP connect, nor on an error reply: one that accepts and then breaks the protocol,
    // or refuses AUTH, is retried up to max_backoff apart.)
    if (connected_ && reply->type != REDIS_REPLY_ERROR) backoff_ = std::chrono::milliseconds(50);
    // A master demoted under us (a failover) refuses writes: find the new one.
    const bool demoted = options_.locate && reply->type == REDIS_REPLY_ERROR &&
                         std::string_view(reply->str, reply->len).substr(0, 8) == "READONLY";
    if (!p.finished) {  // else it timed out earlier: the late reply is dropped
      current_ = std::move(reply);
      deliver(p.done, current_.get(), CommandStatus::ok);
      current_.reset();
      if (a != attempt_) return;  // the callback reset or stopped the connection
    }
    if (demoted) return drop("the master became a replica (READONLY); asking the sentinels again");
  }
  if (a->reader->len - a->reader->pos > kMaxUnparsedBytes)
    return drop("protocol error: more than 1 MiB of a reply waiting to be parsed");
  read(a);
}

void Connection::flush_soon() {
  if (flush_posted_) return;
  asio::post(ioc_, [w = weak_from_this()] {
    auto self = w.lock();
    if (!self) return;
    self->flush_posted_ = false;
    if (auto a = self->attempt_; a && a->up) self->write(a);
  });
  flush_posted_ = true;  // after the post: a post that threw leaves no flag set for ever
}

// A connected socket is almost always writable: the commands of the turn go out in one
// direct write, and only what a full socket buffer refuses waits for an asynchronous one.
void Connection::write(const AttemptPtr& a) {
  if (a->writing || out_.empty()) return;
  a->sending.swap(out_);
  out_.clear();
  auto done = [w = weak_from_this(), a](const boost::system::error_code& ec, std::size_t) {
    a->writing = false;
    auto self = w.lock();
    if (!self || a != self->attempt_) return;
    if (ec) return self->drop("cannot send: " + ec.message());
    a->sending.clear();
    self->write(a);  // what was queued meanwhile
  };
  a->writing = true;
  if (a->tls) return asio::async_write(*a->tls, asio::buffer(a->sending), std::move(done));
  boost::system::error_code ec;
  std::size_t n = a->socket.write_some(asio::buffer(a->sending), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) n = 0, ec = {};
  if (ec) {
    a->writing = false;
    return drop("cannot send: " + ec.message());
  }
  if (n == a->sending.size()) {
    a->writing = false;
    return a->sending.clear();
  }
  asio::async_write(a->socket, asio::buffer(a->sending.data() + n, a->sending.size() - n),
                    std::move(done));
}

void Connection::drop(const std::string& why) {
  auto a = std::move(attempt_);
  attempt_.reset();
  connected_ = false;
  out_.clear();
  if (a) {
    boost::system::error_code ignored;
    a->resolver.cancel();
    a->socket.close(ignored);
    connect_timer_.cancel();
  }
  if (!why.empty()) last_error_ = why;
  if (!why.empty() && !stopped_) log_.warn("redis {}: {}", name(), why);
  // Taken out first (a swap: no allocation, so nothing here can throw and leave the
  // connection without an attempt or a reconnect): a callback may issue commands (refused now)
  // or reset again, which then schedules nothing more.
  std::deque<Pending> failed;
  failed.swap(pending_);
  ++dropping_;
  for (auto& p : failed)
    if (!p.finished) deliver(p.done, nullptr, CommandStatus::disconnected);
  --dropping_;
  if (!stopped_ && dropping_ == 0) schedule_reconnect();
}

void Connection::schedule_reconnect() {
  if (stopped_) return;
  reconnect_timer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  reconnect_timer_.async_wait([w = weak_from_this()](boost::system::error_code ec) {
    if (auto self = w.lock(); self && !ec) self->connect();
  });
}

void append_command(std::string& out, const std::vector<std::string_view>& args) {
  char digits[24];
  auto number = [&](char type, std::size_t n) {
    out += type;
    out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
    out += "\r\n";
  };
  number('*', args.size());
  for (auto a : args) {
    number('$', a.size());
    out.append(a);
    out += "\r\n";
  }
}

bool Connection::command(const std::vector<std::string_view>& args, Clock::time_point deadline,
                         Callback done) {
  if (!attempt_ || !connected_) return false;
  // The bytes and the entry go in together, or neither does: replies are matched by order.
  const auto mark = out_.size();
  try {
    append_command(out_, args);
    pending_.push_back({std::move(done), deadline});
  } catch (...) {
    out_.resize(mark);
    throw;
  }
  arm_timer_for(deadline);
  flush_soon();
  return true;
}

void Connection::arm_timer() {
  auto earliest = Clock::time_point::max();
  for (const auto& p : pending_)
    if (!p.finished) earliest = std::min(earliest, p.deadline);
  if (earliest != Clock::time_point::max()) arm_timer_for(earliest);
}

// Invariant: while armed, the timer expires at or before every unfinished deadline. So a new
// deadline only matters when it is earlier than the armed one (AUTH's connect timeout, say,
// followed by a decision's 100 ms): then the timer moves to it, and the superseded wait,
// cancelled by expires_at, ignores itself.
void Connection::arm_timer_for(Clock::time_point deadline) {
  if (timer_armed_ && armed_for_ <= deadline) return;
  timer_armed_ = true;
  armed_for_ = deadline;
  deadline_timer_.expires_at(deadline);
  deadline_timer_.async_wait(
      [w = weak_from_this(), gen = ++timer_generation_](boost::system::error_code) {
        auto self = w.lock();
        if (!self || gen != self->timer_generation_) return;
        self->timer_armed_ = false;
        self->on_timer();
      });
}

void Connection::deliver(Callback& done, const redisReply* reply, CommandStatus status) noexcept {
  try {
    done(reply, status);
  } catch (...) {
    // Not lost: the worker's event loop rethrows, logs and counts it.
    try {
      asio::post(ioc_, [e = std::current_exception()] { std::rethrow_exception(e); });
    } catch (...) {
      // Out of memory even for that: nothing better than to carry on.
    }
  }
}

void Connection::on_timer() {
  auto now = Clock::now();
  // Collect first: a callback may issue new commands (and so touch pending_).
  std::vector<Callback> expired;
  for (auto& p : pending_) {
    if (!p.finished && p.deadline <= now) {
      p.finished = true;
      expired.push_back(std::move(p.done));
    }
  }
  for (auto& cb : expired) deliver(cb, nullptr, CommandStatus::timeout);
  arm_timer();
}

}  // namespace floodgate::store::redis
