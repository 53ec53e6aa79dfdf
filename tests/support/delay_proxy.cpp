#include "delay_proxy.hpp"

#include <boost/asio.hpp>

#include <array>
#include <atomic>
#include <deque>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace floodgate::testing {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// One direction of a connection: what was read from `from`, each chunk with the time it may
// be written to `to`. Only the front chunk is ever being waited for or written (order is kept);
// `busy` says a timer wait or a write for it is outstanding, so there is never more than one.
struct Hop {
  Hop(tcp::socket& f, tcp::socket& t, asio::io_context& io) : from(f), to(t), timer(io) {}
  tcp::socket& from;
  tcp::socket& to;
  asio::steady_timer timer;
  std::array<char, 16384> buffer{};
  std::deque<std::pair<Clock::time_point, std::string>> queue;
  bool busy = false;
};

// A client's connection and ours to the target. Handlers hold it by shared_ptr; once closed,
// every handler that completes afterwards returns without starting anything.
struct Link {
  Link(tcp::socket c, asio::io_context& io)
      : client(std::move(c)), server(io), up(client, server, io), down(server, client, io) {}
  tcp::socket client;
  tcp::socket server;
  Hop up;    // client -> target
  Hop down;  // target -> client
  bool closed = false;

  // Both sides at once, and nothing still queued is written: the far end went away. The
  // queues are left to die with the Link, as a write being aborted may still refer to them.
  void close() {
    closed = true;
    boost::system::error_code ignored;
    up.timer.cancel();
    down.timer.cancel();
    client.close(ignored);
    server.close(ignored);
  }
};

}  // namespace

struct DelayProxy::Impl {
  // First, so that it is destroyed last: handlers still queued in it own Links (sockets,
  // timers) that must go before their services do.
  asio::io_context io;
  tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::steady_timer accept_retry{io};
  tcp::endpoint target;
  std::atomic<std::int64_t> delay_us{0};
  std::atomic<std::uint64_t> connections{0};
  bool refusing = false;                   // the io thread's
  std::vector<std::weak_ptr<Link>> links;  // the io thread's; pruned on accept
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        // A full descriptor table, say: try again a little later rather than spin on it.
        accept_retry.expires_after(std::chrono::milliseconds(10));
        accept_retry.async_wait([this](boost::system::error_code e) {
          if (!e) accept();
        });
        return;
      }
      start(std::move(s));
      accept();
    });
  }

  void start(tcp::socket s) {
    ++connections;
    boost::system::error_code ignored;
    if (refusing) {
      s.close(ignored);
      return;
    }
    std::erase_if(links, [](const std::weak_ptr<Link>& w) { return w.expired(); });
    auto link = std::make_shared<Link>(std::move(s), io);
    links.push_back(link);
    // Small requests are the point (RESP commands): Nagle must not add delay of its own.
    link->client.set_option(tcp::no_delay(true), ignored);
    link->server.async_connect(target, [this, link](boost::system::error_code ec) {
      if (link->closed) return;
      if (ec) return link->close();  // the target is down: so is the client's connection
      boost::system::error_code ignored2;
      link->server.set_option(tcp::no_delay(true), ignored2);
      read(link, link->up);
      read(link, link->down);
    });
  }

  // Reading never waits for the writes: a chunk's due time is taken when it arrives, so later
  // chunks are not delayed by the ones ahead of them (beyond keeping their order).
  void read(const std::shared_ptr<Link>& link, Hop& hop) {
    hop.from.async_read_some(asio::buffer(hop.buffer),
                             [this, link, &hop](boost::system::error_code ec, std::size_t n) {
                               if (link->closed) return;
                               if (ec)
                                 return link->close();  // EOF or reset on either side ends both
                               auto due = Clock::now() + std::chrono::microseconds(delay_us.load());
                               hop.queue.emplace_back(due, std::string(hop.buffer.data(), n));
                               pump(link, hop);
                               read(link, hop);
                             });
  }

  void pump(const std::shared_ptr<Link>& link, Hop& hop) {
    if (hop.busy || hop.queue.empty() || link->closed) return;
    hop.busy = true;
    auto due = hop.queue.front().first;
    if (due > Clock::now()) {
      hop.timer.expires_at(due);
      hop.timer.async_wait([this, link, &hop](boost::system::error_code) {
        hop.busy = false;
        pump(link, hop);  // returns at once if the link was closed meanwhile
      });
      return;
    }
    // A deque's elements stay where they are while others are pushed behind them.
    asio::async_write(hop.to, asio::buffer(hop.queue.front().second),
                      [this, link, &hop](boost::system::error_code ec, std::size_t) {
                        hop.busy = false;
                        if (link->closed) return;
                        if (ec) return link->close();
                        hop.queue.pop_front();
                        pump(link, hop);
                      });
  }

  void cut(bool refuse) {
    refusing = refuse;
    for (auto& w : links)
      if (auto link = w.lock()) link->close();
    links.clear();
  }
};

DelayProxy::DelayProxy(std::uint16_t target_port, std::chrono::microseconds one_way)
    : impl_(std::make_unique<Impl>()) {
  impl_->target = {asio::ip::make_address("127.0.0.1"), target_port};
  impl_->delay_us = one_way.count();
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([this] {
    // Handlers take error codes, not exceptions; should one throw anyway (bad_alloc), the
    // proxy keeps serving rather than take the test process down with std::terminate.
    for (;;) {
      try {
        impl_->io.run();
        return;
      } catch (...) {
      }
    }
  });
}

DelayProxy::~DelayProxy() {
  impl_->io.stop();
  impl_->thread.join();
  // The thread is gone: the sockets are ours to close. Handlers still queued (and the Links
  // they own) are destroyed with the io_context.
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->cut(true);
}

void DelayProxy::set_delay(std::chrono::microseconds one_way) {
  impl_->delay_us = one_way.count();
}

void DelayProxy::cut(bool refuse) {
  // On the proxy's thread, which owns the sockets; waited for, so that a connection made
  // after cut(true) returns is certainly refused.
  if (impl_->io.get_executor().running_in_this_thread()) return impl_->cut(refuse);
  std::promise<void> done;
  asio::post(impl_->io, [&] {
    impl_->cut(refuse);
    done.set_value();
  });
  done.get_future().wait();
}

std::uint64_t DelayProxy::connections() const {
  return impl_->connections.load();
}

}  // namespace floodgate::testing
