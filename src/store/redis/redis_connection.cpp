#include "redis_connection.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <spdlog/logger.h>

#include <algorithm>
#include <charconv>
#include <exception>

#include "reply_limits.hpp"

namespace floodgate::store::redis {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {
Connection* self_of(const redisAsyncContext* ac) {
  return static_cast<Connection*>(ac->data);
}
}  // namespace

template <typename F>
void Connection::at_c_boundary(F&& body) noexcept {
  try {
    body();
  } catch (...) {
    // Not across hiredis's C frames: the worker's event loop rethrows, logs and counts it.
    try {
      asio::post(ioc_, [e = std::current_exception()] { std::rethrow_exception(e); });
    } catch (...) {
      // Out of memory even for that: nothing better than to carry on.
    }
  }
}

Connection::Connection(asio::io_context& ioc, ConnectionOptions options, spdlog::logger& log)
    : ioc_(ioc),
      options_(std::move(options)),
      log_(log),
      fd_(ioc),
      deadline_timer_(ioc),
      reconnect_timer_(ioc),
      connect_timer_(ioc) {}

Connection::~Connection() {
  stopped_ = true;
  if (ac_) redisAsyncFree(ac_);  // runs every pending callback (as disconnected) and cleanup
  teardown_fd();
}

void Connection::start() {
  connect();
}

void Connection::stop() {
  stopped_ = true;
  reconnect_timer_.cancel();
  connect_timer_.cancel();
  deadline_timer_.cancel();
  if (ac_) redisAsyncFree(ac_);
}

void Connection::reset() {
  // hiredis calls on_disconnect (which schedules the reconnect) only for a context that had
  // connected; one still connecting is scheduled here, so the backoff grows once per reset.
  const bool had_connected = connected_;
  if (ac_) redisAsyncFree(ac_);  // cleanup + callbacks
  if (!had_connected && !stopped_) schedule_reconnect();
}

void Connection::connect() {
  if (stopped_ || ac_) return;
  ++generation_;
  ac_ = redisAsyncConnect(options_.host.c_str(), options_.port);
  if (!ac_ || ac_->err) {
    log_.warn("redis {}:{}: connect failed: {}", options_.host, options_.port,
              ac_ ? ac_->errstr : "out of memory");
    if (ac_) redisAsyncFree(ac_);
    ac_ = nullptr;
    schedule_reconnect();
    return;
  }
  // The descriptor first: setting the connect callback already asks for write readiness.
  boost::system::error_code ec;
  fd_.assign(ac_->c.fd, ec);
  limit_reply_sizes(ac_->c.reader);
  ac_->data = this;
  ac_->ev.data = this;
  ac_->ev.addRead = &Connection::hook_add_read;
  ac_->ev.delRead = &Connection::hook_del_read;
  ac_->ev.addWrite = &Connection::hook_add_write;
  ac_->ev.delWrite = &Connection::hook_del_write;
  ac_->ev.cleanup = &Connection::hook_cleanup;
  redisAsyncSetConnectCallback(ac_, &Connection::on_connect);
  redisAsyncSetDisconnectCallback(ac_, &Connection::on_disconnect);
  // A non-blocking connect reports completion as writability (idempotent with hiredis's own).
  hook_add_write(this);
  if (!options_.password.empty()) {
    std::vector<std::string_view> auth{"AUTH"};
    if (!options_.username.empty()) auth.push_back(options_.username);
    auth.push_back(options_.password);
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (auto a : auth) argv.push_back(a.data()), lens.push_back(a.size());
    pending_.push_back({[this, gen = generation_](const redisReply* r, CommandStatus s) {
                          if (s == CommandStatus::ok && r && r->type == REDIS_REPLY_ERROR &&
                              gen == generation_) {
                            log_.error("redis {}:{}: AUTH refused: {}", options_.host,
                                       options_.port, std::string(r->str, r->len));
                            asio::post(ioc_, [w = weak_from_this()] {
                              if (auto self = w.lock()) self->reset();
                            });
                          }
                        },
                        Clock::now() + options_.connect_timeout});
    // pending_ mirrors hiredis's reply queue one for one: a command hiredis refused must not
    // leave an entry, or every later reply would go to the wrong command.
    if (redisAsyncCommandArgv(ac_, &Connection::on_reply, nullptr, static_cast<int>(argv.size()),
                              argv.data(), lens.data()) != REDIS_OK) {
      pending_.pop_back();
      log_.warn("redis {}:{}: AUTH could not be queued", options_.host, options_.port);
      asio::post(ioc_, [w = weak_from_this()] {
        if (auto self = w.lock()) self->reset();
      });
      return;
    }
    arm_timer_for(pending_.back().deadline);
  }
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait(
      [w = weak_from_this(), gen = generation_](boost::system::error_code ec) {
        auto self = w.lock();
        if (ec || !self || gen != self->generation_ || self->connected_ || !self->ac_) return;
        self->log_.warn("redis {}:{}: connect timed out", self->options_.host, self->options_.port);
        self->reset();
      });
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
  if (!ac_ || !connected_) return false;
  wire_.clear();
  append_command(wire_, args);
  // Queued before hiredis takes the command (an allocation failure here leaves both queues as
  // they were), removed again if hiredis refuses it: the two stay one for one.
  pending_.push_back({std::move(done), deadline});
  if (redisAsyncFormattedCommand(ac_, &Connection::on_reply, nullptr, wire_.data(), wire_.size()) !=
      REDIS_OK) {
    pending_.pop_back();
    return false;
  }
  arm_timer_for(deadline);
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

void Connection::deliver(Callback& done, const redisReply* reply, CommandStatus status) {
  at_c_boundary([&] { done(reply, status); });
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

void Connection::on_reply(redisAsyncContext* ac, void* reply, void*) {
  auto* self = self_of(ac);
  if (!self || self->pending_.empty()) return;
  auto p = std::move(self->pending_.front());
  self->pending_.pop_front();
  if (p.finished) return;  // timed out earlier: the late reply is dropped
  self->deliver(p.done, static_cast<const redisReply*>(reply),
                reply ? CommandStatus::ok : CommandStatus::disconnected);
}

void Connection::on_connect(const redisAsyncContext* ac, int status) {
  auto* self = self_of(ac);
  if (!self) return;
  self->at_c_boundary([self, ac, status] {
    if (status == REDIS_OK) {
      self->connected_ = true;
      self->backoff_ = std::chrono::milliseconds(50);
      self->connect_timer_.cancel();
      self->log_.info("redis {}:{}: connected", self->options_.host, self->options_.port);
    } else {
      // hiredis frees the context after this returns; hook_cleanup has cleared ac_ or will.
      self->log_.warn("redis {}:{}: connect failed: {}", self->options_.host, self->options_.port,
                      ac->errstr);
      self->connected_ = false;
      self->schedule_reconnect();
    }
  });
}

void Connection::on_disconnect(const redisAsyncContext* ac, int status) {
  auto* self = self_of(ac);
  if (!self) return;
  self->connected_ = false;
  self->at_c_boundary([self, ac, status] {
    if (status != REDIS_OK && !self->stopped_)
      self->log_.warn("redis {}:{}: disconnected: {}", self->options_.host, self->options_.port,
                      ac->errstr);
    self->schedule_reconnect();
  });
}

void Connection::wait_readable() {
  wait(asio::posix::stream_descriptor::wait_read);
}
void Connection::wait_writable() {
  wait(asio::posix::stream_descriptor::wait_write);
}

// One readiness wait at a time per direction; when it fires, hiredis does the I/O, and the
// wait is renewed while hiredis still wants it (and the context is still the same one).
void Connection::wait(asio::posix::stream_descriptor::wait_type type) {
  const bool reading = type == asio::posix::stream_descriptor::wait_read;
  bool& waiting = reading ? read_waiting_ : write_waiting_;
  if (waiting || !ac_) return;
  waiting = true;
  fd_.async_wait(
      type, [w = weak_from_this(), gen = generation_, type, reading](boost::system::error_code ec) {
        auto self = w.lock();
        if (!self || gen != self->generation_) return;
        (reading ? self->read_waiting_ : self->write_waiting_) = false;
        const bool& wanted = reading ? self->want_read_ : self->want_write_;
        if (ec || !self->ac_ || !wanted) return;
        if (reading)
          redisAsyncHandleRead(self->ac_);  // may free the context (cleanup runs)
        else
          redisAsyncHandleWrite(self->ac_);
        if (gen == self->generation_ && self->ac_ && wanted) self->wait(type);
      });
}

// A connected socket is almost always writable: rather than wait for the reactor to say so
// (an epoll_ctl and an epoll_wait per command), write at the end of this loop turn, which
// also sends every command the turn queued in one write. Only a full socket buffer falls
// back to waiting for writability.
void Connection::flush_soon() {
  if (flush_posted_ || write_waiting_) return;
  flush_posted_ = true;
  asio::post(ioc_, [w = weak_from_this(), gen = generation_] {
    auto self = w.lock();
    if (!self || gen != self->generation_) return;
    self->flush_posted_ = false;
    if (!self->ac_ || !self->want_write_) return;
    self->flushing_ = true;
    redisAsyncHandleWrite(self->ac_);  // may free the context (cleanup runs)
    self->flushing_ = false;
    if (gen == self->generation_ && self->ac_ && self->want_write_) self->wait_writable();
  });
}

void Connection::teardown_fd() {
  boost::system::error_code ignored;
  if (fd_.is_open()) {
    fd_.cancel(ignored);
    fd_.release();  // hiredis owns and closes the descriptor
  }
}

// The hooks are idempotent: hiredis may call add/del repeatedly.
void Connection::hook_add_read(void* privdata) {
  auto* self = static_cast<Connection*>(privdata);
  self->want_read_ = true;
  self->at_c_boundary([self] { self->wait_readable(); });
}
void Connection::hook_del_read(void* privdata) {
  static_cast<Connection*>(privdata)->want_read_ = false;
}
void Connection::hook_add_write(void* privdata) {
  auto* self = static_cast<Connection*>(privdata);
  self->want_write_ = true;
  if (self->flushing_) return;  // flush_soon() decides what follows
  self->at_c_boundary([self] {
    if (self->connected_)
      self->flush_soon();
    else
      self->wait_writable();  // a connect in progress reports itself as writability
  });
}
void Connection::hook_del_write(void* privdata) {
  static_cast<Connection*>(privdata)->want_write_ = false;
}

void Connection::hook_cleanup(void* privdata) {
  auto* self = static_cast<Connection*>(privdata);
  self->want_read_ = self->want_write_ = false;
  self->read_waiting_ = self->write_waiting_ = false;
  self->flush_posted_ = false;  // a flush posted for this context ignores itself
  self->connected_ = false;
  self->ac_ = nullptr;
  ++self->generation_;  // outstanding waits of this context ignore themselves
  self->teardown_fd();  // noexcept in effect: error_code overloads only
}

}  // namespace floodgate::store::redis
