// HTTP/2 frames from a client into the real connection (H2Connection over a loopback TCP
// socket): the input follows the client connection preface, so libFuzzer explores frames,
// HPACK blocks, flow control and stream states, and every stream that completes its head goes
// through the real pipeline (routing, the limit gate on an in-process store) to an upstream
// that refuses connections (a 502 path). The client side closes once the input is sent; the
// run ends when the connection and every stream coroutine have.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>

#include "h2/h2_connection.hpp"
#include "support.hpp"
#include "worker_fixture.hpp"

namespace {

using namespace floodgate;
using tcp = boost::asio::ip::tcp;

// Port 1 on loopback: nothing listens, so a forwarded stream fails fast with 502.
constexpr const char* kConfig = R"(
server:
  listen: [{ address: "127.0.0.1:8080", protocols: [http1, h2c] }]
  max_header_bytes: 4KiB
  max_body_bytes: 64KiB
  http2: { max_concurrent_streams: 16, max_resets_per_second: 20 }
  timeouts: { header_read: 1s, idle: 1s }
log: { access_log: true, replay_fields: auto }
upstreams:
  origin: { url: http://127.0.0.1:1, connect_timeout: 200ms }
store:
  key_secret: fuzz-key-secret-0123456789abcdef
routes:
  - name: api
    match: { path_prefix: /api/ }
    upstream: origin
    limits:
      - { name: per-ip, algorithm: token_bucket, capacity: 3, refill_rate: 1/s, key: [ip] }
      - { name: open, algorithm: concurrency, limit: 2, key: ["header:x-key"], on_missing_key: skip }
  - name: site
    match: { path_prefix: / }
    upstream: origin
)";

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class NoEntry final : public http::SessionRegistry::Entry {
 public:
  explicit NoEntry(http::SessionRegistry& r) : Entry(r) {}
  void end_idle_wait() override {}
  void abort() override {}
};

// A connected pair over loopback. libFuzzer's timer signal may land in a blocking connect()
// or accept() (EINTR, seen in CI as an uncaught system_error): both are tried again. A connect
// interrupted goes on in the kernel, so the next attempt may find it in progress or done.
bool connect_pair(tcp::acceptor& acceptor, tcp::socket& client, tcp::socket& server) {
  namespace error = boost::asio::error;
  boost::system::error_code ec;
  for (int i = 0; i < 100; ++i) {
    ec = {};
    client.connect(acceptor.local_endpoint(), ec);
    if (ec != error::interrupted && ec != error::already_started) break;
  }
  if (ec && ec != error::already_connected) return false;
  for (int i = 0; i < 100; ++i) {
    ec = {};
    acceptor.accept(server, ec);
    if (ec != error::interrupted) break;
  }
  return !ec;
}

struct Fixture {
  boost::asio::io_context ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)};
  fuzz::WorkerFixture worker{ioc, fuzz::load_fixture(kConfig, "fuzz-h2.yaml")};
  http::Services& w = worker.w;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fx;
  tcp::socket client(fx.ioc);
  tcp::socket server(fx.ioc);
  if (!connect_pair(fx.acceptor, client, server))
    return 0;  // the machine's trouble, not the input's
  // Nothing more will come from the client: the connection reads the input, then EOF.
  client.shutdown(tcp::socket::shutdown_send);
  {
    http::Transport transport(std::move(server));
    http::Watchdog watch(fx.ioc.get_executor());
    NoEntry entry(fx.w.sessions);
    boost::beast::flat_buffer already;
    auto buf = already.prepare(kPreface.size() + size);
    std::memcpy(buf.data(), kPreface.data(), kPreface.size());
    if (size > 0) std::memcpy(static_cast<char*>(buf.data()) + kPreface.size(), data, size);
    already.commit(kPreface.size() + size);
    http::H2Connection h2(fx.w, transport, watch, "10.1.2.3", *config::parse_ip("10.1.2.3"), entry);
    bool done = false;
    boost::asio::co_spawn(fx.ioc, h2.run(already), [&done](std::exception_ptr) { done = true; });
    // Until the connection has ended; its watchdogs' timers may still be armed: they are
    // cancelled when the objects go, below.
    while (!done && fx.ioc.run_one() > 0) {
    }
  }
  fx.ioc.poll();
  fx.ioc.restart();
  fx.worker.upstreams.pool.clear();
  return 0;
}
