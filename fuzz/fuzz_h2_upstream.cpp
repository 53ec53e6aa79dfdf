// HTTP/2 frames from an origin into the real h2 upstream connection (upstream_h2.hpp): a
// hostile or broken origin. Each input is what the origin sends after its SETTINGS frame, on
// a loopback TCP connection the worker's H2UpstreamPool opened; meanwhile one call is sent
// on it (a POST with a body and trailers) and its response, whatever arrives, is taken as a
// client would take it. The origin then closes; the run ends when the call and the
// connection's coroutines have.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support.hpp"
#include "worker_fixture.hpp"

namespace {

using namespace floodgate;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// An empty SETTINGS frame: the server's connection preface, which the input follows.
constexpr unsigned char kSettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

struct Fixture {
  asio::io_context ioc;
  tcp::acceptor origin{ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  fuzz::WorkerFixture worker{
      ioc, fuzz::load_fixture(
               "server: { listen: [127.0.0.1:8080] }\nupstreams:\n  origin: { url: "
               "\"http://127.0.0.1:" +
                   std::to_string(origin.local_endpoint().port()) +
                   "\", protocol: h2, connect_timeout: 200ms, response_timeout: 1s }\n"
                   "store: { key_secret: fuzz-key-secret-0123456789abcdef }\n"
                   "routes: [{ name: all, match: { path_prefix: / }, upstream: origin }]\n",
               "fuzz-h2-upstream.yaml")};
  http::H2UpstreamPool& h2 = worker.h2_pool;
};

// One call as a stream's user makes it: sent, then its response taken until it closes.
asio::awaitable<void> one_call(http::H2UpstreamPool& h2, const config::UpstreamServer& u) {
  auto got = co_await h2.get(u);
  if (!got.conn) co_return;
  asio::steady_timer wake(co_await asio::this_coro::executor);
  auto call = std::make_shared<http::H2Call>();
  call->waker = &wake;
  http::H2CallGuard guard{call, got.conn};
  call->out = std::string("\x00\x00\x00\x00\x02\x08\x01", 7);  // a gRPC message
  call->out_done = true;
  call->out_trailers.add("x-trailer", "1");
  http::H2HeaderBlock head;
  head.add(":method", "POST");
  head.add(":scheme", "http");
  head.add(":authority", "origin");
  head.add(":path", "/pkg.Service/Method");
  head.add("content-type", "application/grpc");
  head.add("te", "trailers");
  if (!got.conn->submit(call, head.pairs(), true)) co_return;
  while (!call->closed) {
    got.conn->take(*call, call->in.size());
    call->in.clear();
    wake.expires_after(std::chrono::seconds(2));
    auto [ec] = co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!ec) co_return;  // nothing for 2 s: the guard resets the stream
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fx;
  const auto& u = fx.worker.source.get()->upstreams.front().servers.front();
  // The origin: on every connection the pool opens during this input (it opens another when
  // one goes away before taking the call), its SETTINGS and the input, then it closes its
  // side. Every connection is accepted here, so that none is left for the next input.
  std::string bytes(reinterpret_cast<const char*>(kSettings), sizeof kSettings);
  bytes.append(reinterpret_cast<const char*>(data), size);
  std::vector<std::unique_ptr<tcp::socket>> peers;
  std::function<void()> accept_next = [&] {
    auto* peer = peers.emplace_back(std::make_unique<tcp::socket>(fx.ioc)).get();
    fx.origin.async_accept(*peer, [&, peer](boost::system::error_code ec) {
      if (ec) return;
      asio::async_write(*peer, asio::buffer(bytes), [peer](boost::system::error_code, std::size_t) {
        boost::system::error_code ignored;
        peer->shutdown(tcp::socket::shutdown_send, ignored);
      });
      accept_next();
    });
  };
  accept_next();
  bool called = false;
  asio::co_spawn(fx.ioc, one_call(fx.h2, u), [&called](std::exception_ptr) { called = true; });
  while (!called && fx.ioc.run_one() > 0) {
  }
  fx.h2.close_all();
  while (fx.h2.running() > 0 && fx.ioc.run_one() > 0) {
  }
  boost::system::error_code ignored;
  fx.origin.cancel(ignored);
  for (auto& peer : peers) peer->close(ignored);
  fx.ioc.poll();  // the cancelled accept and writes complete here, before `bytes` goes
  fx.ioc.restart();
  return 0;
}
