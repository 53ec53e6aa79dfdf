#include "floodgate/http/server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <future>
#include <list>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "floodgate/store/limit_store.hpp"
#include "floodgate/store/redis_store.hpp"
#include "floodgate/tls/contexts.hpp"
#include "session.hpp"
#include "worker_context.hpp"

namespace floodgate::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using reuse_port = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

namespace {

// Logs what escaped a coroutine instead of losing it silently; nothing on the request path
// is meant to throw, so anything arriving here is a bug worth seeing.
auto log_exceptions(spdlog::logger& log, const char* what) {
  return [&log, what](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log.error("{}: unexpected exception: {}", what, ex.what());
    }
  };
}

tcp::endpoint to_endpoint(const config::Endpoint& ep) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(ep.host, ec);
  if (ec) throw std::system_error(ec, "listen address " + ep.to_string() + " is not an IP address");
  return {address, ep.port};
}

class Worker {
 public:
  Worker(config::ConfigSource& config, spdlog::logger& log, const ServerDeps& deps,
         std::string lease_prefix)
      : ctx_{config, log, deps.clock,  UpstreamPool(ioc_.get_executor()), {}, {},
             {},     {},  deps.metrics} {
    ctx_.store = deps.make_store(ioc_);
    ctx_.local = deps.make_local(ioc_);
    ctx_.lease_prefix = std::move(lease_prefix);
    ctx_.access_log = deps.access_log ? deps.access_log : &log;
  }

  ~Worker() {
    join();
    *ctx_.alive = false;
  }

  // Opens an SO_REUSEPORT acceptor for server.listen[index]; every worker binds the same
  // port and the kernel spreads connections across them. Returns the bound port.
  std::uint16_t listen(tcp::endpoint ep, std::size_t index, const config::Listener& listener) {
    auto& entry = acceptors_.emplace_back(ioc_, index, listener);
    auto& acc = entry.acceptor;
    boost::system::error_code ec;
    acc.open(ep.protocol(), ec);
    if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acc.set_option(reuse_port(true), ec);
    if (!ec && ep.address().is_v6()) acc.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acc.bind(ep, ec);
    if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      auto text = ep.address().to_string() + ":" + std::to_string(ep.port());
      throw std::system_error(ec, "cannot listen on " + text);
    }
    return acc.local_endpoint().port();
  }

  void start() {
    for (auto& entry : acceptors_)
      asio::co_spawn(ioc_, accept_loop(entry), log_exceptions(ctx_.log, "acceptor"));
    thread_ = std::thread([this] { ioc_.run(); });
  }

  // Called from another thread: the work happens on the worker's own loop.
  void drain(std::chrono::steady_clock::time_point deadline) {
    asio::post(ioc_, [this, deadline] {
      for (auto& entry : acceptors_) {
        boost::system::error_code ignored;
        entry.acceptor.close(ignored);
      }
      ctx_.draining = true;
      asio::co_spawn(ioc_, stop_when_idle(deadline), log_exceptions(ctx_.log, "drain"));
    });
  }

  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Read from the admin thread: the Redis store's health flags are atomics.
  bool store_healthy() const {
    auto* h = dynamic_cast<const store::RedisHealth*>(ctx_.store.get());
    return !h || h->healthy();
  }

 private:
  struct Acceptor {
    Acceptor(asio::io_context& ioc, std::size_t index, const config::Listener& l)
        : acceptor(ioc), index(index), address(l.address.to_string()), tls(l.tls.has_value()) {
      if (l.tls) started_with = l.tls->contexts;
    }
    tcp::acceptor acceptor;
    std::size_t index;    // into server.listen
    std::string address;  // as configured: a reload may reorder listeners (restart needed)
    bool tls;
    std::shared_ptr<const tls::ServerContexts> started_with;
  };

  // The certificates a new connection gets: the current snapshot's for this listener, so
  // that a reload (SIGHUP) replaces them for new connections while open ones keep theirs.
  // A reload that changed the listeners themselves takes effect at restart: until then the
  // certificates loaded at start stay.
  std::shared_ptr<const tls::ServerContexts> tls_for(const Acceptor& a) const {
    if (!a.tls) return nullptr;
    auto cfg = ctx_.config.get();
    const auto& listen = cfg->server.listen;
    if (a.index < listen.size() && listen[a.index].address.to_string() == a.address &&
        listen[a.index].tls && listen[a.index].tls->contexts)
      return listen[a.index].tls->contexts;
    return a.started_with;
  }

  asio::awaitable<void> accept_loop(Acceptor& entry) {
    auto& acc = entry.acceptor;
    for (;;) {
      auto [ec, socket] = co_await acc.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec == asio::error::operation_aborted || !acc.is_open()) co_return;
      if (ec) {
        // Out of descriptors or similar: back off briefly instead of spinning.
        ctx_.log.warn("accept failed: {}", ec.message());
        asio::steady_timer pause(ioc_, std::chrono::milliseconds(50));
        co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(ioc_, run_session(std::move(socket), tls_for(entry), ctx_),
                     log_exceptions(ctx_.log, "session"));
    }
  }

  asio::awaitable<void> stop_when_idle(std::chrono::steady_clock::time_point deadline) {
    asio::steady_timer tick(ioc_);
    while (ctx_.in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
      tick.expires_after(std::chrono::milliseconds(20));
      co_await tick.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    if (ctx_.in_flight > 0)
      ctx_.log.warn("drain: {} requests still in flight at the deadline", ctx_.in_flight);
    ctx_.pool.clear();
    ioc_.stop();
  }

  // Member order matters: the io_context outlives everything that holds its executor.
  // One thread runs this loop and only it touches its sockets: no reactor I/O locking.
  asio::io_context ioc_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  WorkerContext ctx_;
  std::list<Acceptor> acceptors_;
  std::thread thread_;
};

}  // namespace

struct Server::Impl {
  config::ConfigSource& config;
  std::shared_ptr<spdlog::logger> log;
  ServerDeps deps;
  // The admin thread asks for store health while the main thread may be draining: the list
  // of workers changes only under this lock (found by ThreadSanitizer).
  mutable std::mutex workers_mutex;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::uint16_t> ports;
};

Server::Server(config::ConfigSource& config, std::shared_ptr<spdlog::logger> log, ServerDeps deps)
    : impl_(new Impl{config, std::move(log), std::move(deps), {}, {}, {}}) {}

Server::~Server() {
  if (!impl_->workers.empty()) drain(std::chrono::milliseconds(0));
}

void Server::start() {
  auto cfg = impl_->config.get();
  int threads = cfg->server.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Lease ids must be unique across every instance sharing a store: a random instance part.
  std::random_device rd;
  char instance[17];
  std::snprintf(instance, sizeof instance, "%08x%08x", rd(), rd());
  for (int i = 0; i < threads; ++i)
    impl_->workers.push_back(
        std::make_unique<Worker>(impl_->config, *impl_->log, impl_->deps,
                                 std::string(instance) + ":" + std::to_string(i) + ":"));
  for (std::size_t index = 0; index < cfg->server.listen.size(); ++index) {
    const auto& l = cfg->server.listen[index];
    auto ep = to_endpoint(l.address);
    // With port 0 the first worker gets an ephemeral port and the others join it.
    ep.port(impl_->workers.front()->listen(ep, index, l));
    for (std::size_t i = 1; i < impl_->workers.size(); ++i) impl_->workers[i]->listen(ep, index, l);
    impl_->ports.push_back(ep.port());
  }
  for (auto& w : impl_->workers) w->start();
}

std::vector<std::uint16_t> Server::ports() const {
  return impl_->ports;
}

std::pair<int, int> Server::store_health() const {
  std::lock_guard lock(impl_->workers_mutex);
  int healthy = 0;
  for (const auto& w : impl_->workers) healthy += w->store_healthy() ? 1 : 0;
  return {healthy, static_cast<int>(impl_->workers.size())};
}

void Server::drain(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (auto& w : impl_->workers) w->drain(deadline);
  for (auto& w : impl_->workers) w->join();
  std::lock_guard lock(impl_->workers_mutex);
  impl_->workers.clear();
}

}  // namespace floodgate::http
