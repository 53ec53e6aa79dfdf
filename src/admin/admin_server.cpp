#include "admin_server.hpp"

#include "floodgate/admin/prometheus.hpp"

#include <spdlog/logger.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <thread>

#include "live_view.hpp"

namespace floodgate::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

struct AdminServer::Impl {
  config::Endpoint listen;
  config::ConfigSource& config;
  Metrics& metrics;
  AdminState& state;
  spdlog::logger& log;
  AdminApi api;
  asio::io_context ioc{1};
  // The calls that may wait (the API on the store's Redis or the workers, /top on the
  // workers) run here, one at a time, so that /healthz, /readyz and /metrics never wait
  // behind a slow or unreachable store.
  asio::thread_pool waiting{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer tick{ioc};
  StatsHistory history;
  std::thread thread;

  std::pair<int, int> store_health() const {
    return metrics.store_health ? metrics.store_health() : std::pair<int, int>{0, 0};
  }

  void sample() {
    history.sample(metrics, store_health());
    tick.expires_after(StatsHistory::kInterval);
    tick.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) sample();
    });
  }

  using Response = bhttp::response<bhttp::string_body>;

  static bool may_wait(std::string_view target) {
    target = target.substr(0, target.find('?'));
    return target == "/top" || target.starts_with("/keys") || target.starts_with("/overrides");
  }

  // On the admin thread, or (may_wait) on `waiting`'s: nothing here touches `history`
  // then, and what the API and /top use is theirs to lock.
  Response answer(const bhttp::request<bhttp::string_body>& req) {
    bhttp::response<bhttp::string_body> res{bhttp::status::ok, req.version()};
    res.set(bhttp::field::server, "floodgate-admin");
    res.set(bhttp::field::cache_control, "no-store");
    if (auto r = answer_api(req, *config.get(), api, metrics, log)) return std::move(*r);
    auto target = std::string_view(req.target());
    const auto question = target.find('?');
    const auto query =
        question == std::string_view::npos ? std::string_view() : target.substr(question + 1);
    target = target.substr(0, question);
    if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      res.result(bhttp::status::method_not_allowed);
      res.set(bhttp::field::allow, "GET, HEAD");
      res.body() = "method not allowed\n";
    } else if (target == "/metrics") {
      res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = render_prometheus(metrics);
    } else if (target == "/healthz") {
      res.set(bhttp::field::content_type, "text/plain");
      res.body() = "ok\n";
    } else if (target == "/readyz") {
      bool draining = state.draining.load();
      auto [healthy, total] = store_health();
      // A sick store is the routes' policies' business, not a reason to leave the balancer.
      res.result(draining ? bhttp::status::service_unavailable : bhttp::status::ok);
      res.set(bhttp::field::content_type, "application/json");
      res.body() = std::string("{\"ready\":") + (draining ? "false" : "true") +
                   ",\"draining\":" + (draining ? "true" : "false") + ",\"store\":{\"backend\":\"" +
                   metrics.backend + "\",\"healthy\":" + (healthy == total ? "true" : "false") +
                   ",\"healthy_connections\":" + std::to_string(healthy) +
                   ",\"connections\":" + std::to_string(total) + "}}\n";
    } else if (target == "/config") {
      res.set(bhttp::field::content_type, "application/json");
      res.body() = redacted_config_json(*config.get());
    } else if (target == "/") {
      res.set(bhttp::field::content_type, "text/html; charset=utf-8");
      res.body() = admin_page();
    } else if (target == "/stats") {
      res.set(bhttp::field::content_type, "application/json");
      res.body() = history.json(metrics, state.draining.load());
    } else if (target == "/top") {
      // Asking the workers blocks this thread for as long as their loops take to answer.
      auto answer = top_json(api.workers ? api.workers->top(std::chrono::milliseconds(500))
                                         : std::vector<limit::LimitTop>{},
                             query);
      res.result(static_cast<bhttp::status>(answer.status));
      res.set(bhttp::field::content_type, "application/json");
      res.body() = std::move(answer.body);
    } else {
      res.result(bhttp::status::not_found);
      res.set(bhttp::field::content_type, "text/plain");
      res.body() =
          "not found: try /, /top, /stats, /metrics, /healthz, /readyz, /config, /keys or "
          "/overrides\n";
    }
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    return res;
  }

  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    for (;;) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.header_limit(8192);
      parser.body_limit(8192);
      stream.expires_after(std::chrono::seconds(30));
      auto [ec, n] =
          co_await bhttp::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      const auto& req = parser.get();
      Response res;
      if (may_wait(req.target()))
        res = co_await asio::co_spawn(
            waiting, [this, &req]() -> asio::awaitable<Response> { co_return answer(req); },
            asio::use_awaitable);
      else
        res = answer(req);
      auto [wec, wn] =
          co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      if (wec || !res.keep_alive()) co_return;
    }
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) continue;
      asio::co_spawn(ioc, session(std::move(socket)), asio::detached);
    }
  }
};

AdminServer::AdminServer(const config::Endpoint& listen, config::ConfigSource& config,
                         Metrics& metrics, AdminState& state, spdlog::logger& log, AdminApi api)
    : impl_(new Impl{listen, config, metrics, state, log, std::move(api)}) {}

AdminServer::~AdminServer() {
  stop();
}

void AdminServer::start() {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(impl_->listen.host, ec);
  tcp::endpoint ep(address, impl_->listen.port);
  if (!ec) impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::system_error(ec, "cannot listen on admin address " + impl_->listen.to_string());
  asio::co_spawn(impl_->ioc, impl_->accept_loop(), asio::detached);
  asio::post(impl_->ioc, [this] { impl_->sample(); });
  impl_->thread = std::thread([this] { impl_->ioc.run(); });
}

std::uint16_t AdminServer::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void AdminServer::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->ioc.stop();
  impl_->thread.join();
  impl_->waiting.join();  // a call under way ends within its store's timeout
}

}  // namespace floodgate::admin
