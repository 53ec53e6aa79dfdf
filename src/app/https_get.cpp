#include "https_get.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "floodgate/tls/contexts.hpp"

namespace floodgate::app {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using asio::as_tuple;
using asio::use_awaitable;

asio::awaitable<void> get(const config::HttpsUrl& s, const HttpsRequest& request,
                          HttpsAnswer& out) {
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  auto [rec, endpoints] = co_await resolver.async_resolve(s.host, s.port, as_tuple(use_awaitable));
  if (rec) {
    out.error = "cannot resolve " + s.host + ": " + rec.message();
    co_return;
  }
  tcp::socket socket(ex);
  auto [cec, ep] = co_await asio::async_connect(socket, endpoints, as_tuple(use_awaitable));
  if (cec) {
    out.error = "cannot connect: " + cec.message();
    co_return;
  }
  SSL* ssl = tls::new_client_connection(s.client.get(), s.host);
  if (!ssl) {
    out.error = "cannot start TLS";
    co_return;
  }
  asio::ssl::stream<tcp::socket&> stream(socket, ssl);  // owns ssl from here
  auto [hec] =
      co_await stream.async_handshake(asio::ssl::stream_base::client, as_tuple(use_awaitable));
  if (hec) {
    auto why = tls::verify_failure(ssl);
    out.error = "TLS handshake failed: " + (why.empty() ? hec.message() : why);
    co_return;
  }
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, request.target, 11};
  const auto host = s.host.find(':') == std::string::npos ? s.host : "[" + s.host + "]";
  req.set(bhttp::field::host, s.port == "443" ? host : host + ":" + s.port);
  req.set(bhttp::field::user_agent, "floodgate");
  req.set(bhttp::field::accept, request.accept);
  if (!request.if_none_match.empty()) req.set(bhttp::field::if_none_match, request.if_none_match);
  req.set(bhttp::field::connection, "close");
  auto [wec, written] = co_await bhttp::async_write(stream, req, as_tuple(use_awaitable));
  if (wec) {
    out.error = "cannot send: " + wec.message();
    co_return;
  }
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(request.max_body);
  auto [rdec, read] = co_await bhttp::async_read(stream, buffer, parser, as_tuple(use_awaitable));
  if (rdec) {
    out.error = "cannot read the answer: " + rdec.message();
    co_return;
  }
  out.status = parser.get().result_int();
  out.etag = std::string(parser.get()[bhttp::field::etag]);
  out.body = std::move(parser.get().body());
}

}  // namespace

HttpsAnswer https_get(const config::HttpsUrl& server, const HttpsRequest& request) {
  asio::io_context ioc;
  HttpsAnswer out;
  bool done = false;
  asio::co_spawn(ioc, get(server, request, out), [&](std::exception_ptr e) {
    done = true;
    if (e) out.error = "unexpected failure";
  });
  ioc.run_for(request.timeout);
  if (!done)
    out.error =
        "no answer within " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(request.timeout).count()) +
        " s";
  return out;
}

}  // namespace floodgate::app
