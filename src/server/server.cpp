#include "floodgate/server/server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdio>
#include <future>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "acceptors.hpp"
#include "floodgate/decide/key_lookup.hpp"
#include "floodgate/store/limit_store.hpp"
#include "health_checks.hpp"
#include "net/connection_budget.hpp"
#include "net/report_exception.hpp"
#include "quic_listeners.hpp"
#include "rls/rls_service.hpp"
#include "upstream_proxy.hpp"

namespace floodgate::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Logs and counts what escaped a coroutine or a handler instead of losing it (or the worker)
// silently; nothing on the request path is meant to throw, so anything here is a bug worth
// seeing. Exceptions raised inside callbacks (a Redis command's, nghttp2's) arrive here too,
// rethrown by a handler.
tcp::endpoint to_endpoint(const config::Endpoint& ep) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(ep.host, ec);
  if (ec) throw std::system_error(ec, "listen address " + ep.to_string() + " is not an IP address");
  return {address, ep.port};
}

class Worker {
 public:
  Worker(config::ConfigSource& config, spdlog::logger& log, const ServerDeps& deps,
         std::string lease_prefix, ConnectionBudget& connections, UpstreamHealth& health,
         std::uint8_t index, const QuicSecret& secret)
      : store_(deps.make_store(ioc_)),
        local_(deps.make_local(ioc_)),
        clock_(deps.clock),
        gate_(*store_, *local_, deps.metrics, log, std::move(lease_prefix), deps.overrides),
        upstreams_(ioc_.get_executor(), health, log, deps.metrics),
        services_(config, deps.clock, gate_, proxy_, log, deps.access_log ? *deps.access_log : log,
                  deps.jwks, deps.metrics),
        acceptors_(ioc_, config, services_, connections),
        quic_(ioc_, services_, connections, index, secret) {
    services_.rls = &rls_;
  }

  ~Worker() { join(); }

  // Opens this worker's acceptor for server.listen[index] (rls: rls.listen[index]), and its
  // UDP socket on the same port when the listener lists h3.
  std::uint16_t listen(tcp::endpoint ep, std::size_t index, const config::Listener& listener,
                       bool rls) {
    const auto port = acceptors_.listen(ep, index, listener, rls);
    if (!rls && listener.speaks(config::Protocol::h3) && listener.tls && listener.tls->quic)
      quic_.listen(asio::ip::udp::endpoint(ep.address(), port), index, listener);
    return port;
  }

  // `checker`: this worker runs the process's active health checks.
  void start(bool checker) {
    acceptors_.start();
    quic_.start();
    if (checker)
      asio::co_spawn(ioc_, run_health_checks(checks_),
                     log_exceptions(services_.log, services_.metrics, "health checks"));
    thread_ = std::thread([this] { run(); });
  }

  // Called from another thread: the work happens on the worker's own loop.
  void drain(std::chrono::steady_clock::time_point deadline) {
    asio::post(ioc_, [this, deadline] {
      acceptors_.close();
      quic_.close();
      services_.draining = true;
      // Keep-alive connections waiting for a request close now (they have nothing to lose);
      // stop_when_idle takes care of the rest.
      services_.sessions.end_idle_waits();
      asio::co_spawn(ioc_, stop_when_idle(deadline),
                     log_exceptions(services_.log, services_.metrics, "drain"));
    });
  }

  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Read from the admin thread: stores answer health from atomics.
  bool store_healthy() const { return store_->healthy(); }

  // Asked from the admin thread, answered on this worker's loop (decide/key_lookup.hpp).
  std::future<KeyAnswer> keys(KeyRequest request) {
    auto done = std::make_shared<std::promise<KeyAnswer>>();
    auto answer = done->get_future();
    asio::co_spawn(
        ioc_,
        [this, request = std::move(request), done]() -> asio::awaitable<void> {
          done->set_value(co_await decide::answer_key_request(gate_, *store_, services_.snapshot(),
                                                              clock_.now(), request));
        },
        [done](std::exception_ptr e) {
          if (e) done->set_value(KeyAnswer{500, "{\"error\":\"internal error\"}\n"});
        });
    return answer;
  }
  void forget(std::string key) {
    asio::post(ioc_, [this, key = std::move(key)] { gate_.forget(key); });
  }

  // Asked from the admin thread: the copies are made on this worker's loop, between two
  // handlers, so requests write their summaries without locks.
  std::future<std::vector<limit::LimitTop>> top() {
    auto done = std::make_shared<std::promise<std::vector<limit::LimitTop>>>();
    auto copies = done->get_future();
    asio::post(ioc_, [this, done] {
      std::vector<limit::LimitTop> out;
      gate_.top(*services_.snapshot(), clock_.now(), out);
      done->set_value(std::move(out));
    });
    return copies;
  }

 private:
  // A handler that throws must not end the worker (std::terminate, every connection lost):
  // report it and go on; io_context::run may be called again after an exception.
  void run() {
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (...) {
        report_exception(services_.log, services_.metrics, "worker", std::current_exception());
      }
    }
  }

  // The rest of a drain (its start closed the acceptors and the idle connections). Requests
  // in flight, tunnels included, may finish until `deadline`; then every session still open
  // is closed. The loop stops only once the last session's coroutine has ended: each uses
  // services_ to its last line, and they are destroyed before the io_context, which destroys
  // frames still queued in it only then.
  asio::awaitable<void> stop_when_idle(std::chrono::steady_clock::time_point deadline) {
    using namespace std::chrono_literals;
    using clock = std::chrono::steady_clock;
    asio::steady_timer tick(ioc_);
    auto sleep_for = [&tick](std::chrono::milliseconds d) {
      tick.expires_after(d);
      return tick.async_wait(asio::as_tuple(asio::use_awaitable));
    };
    while (services_.in_flight > 0 && clock::now() < deadline) co_await sleep_for(20ms);
    if (services_.in_flight > 0)
      services_.log.warn("drain: {} requests still in flight at the deadline", services_.in_flight);
    // Those still handshaking or reading a request; past the deadline everything. Sessions
    // closing by themselves (an idle one's close_notify) get until the deadline.
    bool past = clock::now() >= deadline;
    if (past)
      services_.sessions.abort_all();
    else
      services_.sessions.abort_busy();
    auto reported = clock::now();
    while (services_.sessions.size() > 0 || acceptors_.looping() || quic_.looping()) {
      co_await sleep_for(5ms);
      const auto now = clock::now();
      if (!past && now >= deadline) {
        past = true;
        services_.sessions.abort_all();
      }
      // Only a store decision or a name lookup outlasts an abort, each with its own deadline.
      if (now - reported >= 1s) {
        reported = now;
        services_.log.warn("drain: waiting for {} sessions to end", services_.sessions.size());
        services_.sessions.abort_all();
      }
    }
    // Leased units go back to the store before the loop (and the store's connection) stops.
    auto returned = std::make_shared<bool>(false);
    store_->close([returned] { *returned = true; });
    for (const auto until = clock::now() + 1s; !*returned && clock::now() < until;)
      co_await sleep_for(5ms);
    // A check under way ends within its timeout; the checker, at its next tick.
    while (checks_.running > 0) co_await sleep_for(5ms);
    upstreams_.pool.clear();
    // HTTP/2 upstream connections run coroutines of their own: ended, and waited for.
    h2_pool_.close_all();
    while (h2_pool_.running() > 0) co_await sleep_for(5ms);
    ioc_.stop();
  }

  // Member order matters: the io_context outlives everything that holds its executor.
  // One thread runs this loop and only it touches its sockets: no reactor I/O locking.
  asio::io_context ioc_{BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO};
  std::unique_ptr<store::LimitStore> store_;  // the configured backend
  std::unique_ptr<store::LimitStore> local_;  // the in-process one, for on_store_error: local
  const limit::Clock& clock_;
  decide::Gate gate_;  // decides on the worker's stores
  Upstreams upstreams_;
  H2UpstreamPool h2_pool_{upstreams_.pool};  // connections to `protocol: h2` upstreams
  UpstreamProxy proxy_{upstreams_, h2_pool_, gate_};
  rls::RlsService rls_{gate_};  // Envoy's rate limit service, on rls.listen
  Services services_;           // what the fronts use
  HealthChecks checks_{upstreams_, h2_pool_, services_};
  Acceptors acceptors_;
  QuicListeners quic_;  // h3 listeners' UDP sockets
  std::thread thread_;
};

}  // namespace

struct Server::Impl {
  config::ConfigSource& config;
  std::shared_ptr<spdlog::logger> log;
  ServerDeps deps;
  ConnectionBudget connections;  // server.max_connections; outlives the workers
  QuicSecret quic_secret{};      // Retry and stateless reset tokens: every worker's
  UpstreamHealth health;         // every upstream server's state; outlives the workers
  // The admin thread asks for store health while the main thread may be draining: the list
  // of workers changes only under this lock (found by ThreadSanitizer).
  mutable std::mutex workers_mutex;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::uint16_t> ports;
};

Server::Server(config::ConfigSource& config, std::shared_ptr<spdlog::logger> log, ServerDeps deps)
    : impl_(new Impl{config, std::move(log), std::move(deps), {}, {}, {}, {}, {}, {}}) {}

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
  for (auto& b : impl_->quic_secret) b = static_cast<std::uint8_t>(rd());
  for (int i = 0; i < threads; ++i)
    impl_->workers.push_back(std::make_unique<Worker>(
        impl_->config, *impl_->log, impl_->deps,
        std::string(instance) + ":" + std::to_string(i) + ":", impl_->connections, impl_->health,
        static_cast<std::uint8_t>(i), impl_->quic_secret));
  // server.listen's ports, then rls.listen's.
  auto listen = [&](const std::vector<config::Listener>& list, bool rls) {
    for (std::size_t index = 0; index < list.size(); ++index) {
      const auto& l = list[index];
      auto ep = to_endpoint(l.address);
      // With port 0 the first worker gets an ephemeral port and the others join it.
      ep.port(impl_->workers.front()->listen(ep, index, l, rls));
      for (std::size_t i = 1; i < impl_->workers.size(); ++i)
        impl_->workers[i]->listen(ep, index, l, rls);
      impl_->ports.push_back(ep.port());
    }
  };
  listen(cfg->server.listen, false);
  listen(cfg->rls.listen, true);
  for (std::size_t i = 0; i < impl_->workers.size(); ++i) impl_->workers[i]->start(i == 0);
}

std::vector<std::uint16_t> Server::ports() const {
  return impl_->ports;
}

std::vector<metrics::UpstreamServerSample> Server::upstream_servers() const {
  return impl_->health.samples(*impl_->config.get());
}

std::pair<int, int> Server::store_health() const {
  std::lock_guard lock(impl_->workers_mutex);
  int healthy = 0;
  for (const auto& w : impl_->workers) healthy += w->store_healthy() ? 1 : 0;
  return {healthy, static_cast<int>(impl_->workers.size())};
}

std::vector<limit::LimitTop> Server::top(std::chrono::milliseconds wait) const {
  std::lock_guard lock(impl_->workers_mutex);
  std::vector<std::future<std::vector<limit::LimitTop>>> asked;
  for (const auto& w : impl_->workers) asked.push_back(w->top());
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<limit::LimitTop> out;
  for (auto& copies : asked) {
    // A worker that stopped (draining) never answers: its callers are left out.
    if (copies.wait_until(deadline) != std::future_status::ready) continue;
    for (auto& t : copies.get()) out.push_back(std::move(t));
  }
  return out;
}

KeyAnswer Server::keys(const KeyRequest& request, std::chrono::milliseconds wait) const {
  std::lock_guard lock(impl_->workers_mutex);
  if (impl_->workers.empty()) return {503, "{\"error\":\"draining\"}\n"};
  auto answer = impl_->workers.front()->keys(request);
  if (answer.wait_for(wait) != std::future_status::ready)
    return {503, "{\"error\":\"the worker did not answer in time\"}\n"};
  auto a = answer.get();
  // The reset key's refusals, remembered by every worker's deny cache, are untrue now.
  if (request.reset && a.status < 300)
    for (std::size_t i = 1; i < impl_->workers.size(); ++i) impl_->workers[i]->forget(a.store_key);
  return a;
}

void Server::drain(std::chrono::milliseconds grace) {
  auto deadline = std::chrono::steady_clock::now() + grace;
  for (auto& w : impl_->workers) w->drain(deadline);
  for (auto& w : impl_->workers) w->join();
  std::lock_guard lock(impl_->workers_mutex);
  impl_->workers.clear();
}

}  // namespace floodgate::http
