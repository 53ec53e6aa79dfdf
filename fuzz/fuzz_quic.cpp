// QUIC and HTTP/3 input into the real endpoint (QuicEndpoint over a loopback UDP socket, with
// the worker's real services: a stream that completes its head goes through the pipeline to an
// upstream that refuses connections). The first byte picks what the rest is:
//   even: datagrams (each a 2-byte big-endian length, then its bytes) sent from one client
//         address: packet headers, Version Negotiation, Initials, Retry tokens, stateless
//         resets, connection ID lookups;
//   odd:  the bytes of one request stream, sent raw (HTTP/3 frames, QPACK) after a real
//         handshake by an in-process client (tests/support/quic_client.hpp): what nghttp3 and
//         floodgate's callbacks, limits and pipeline make of a client's stream.
// The endpoint is closed after each input and every connection aborted; the run ends when
// the last one has.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include <cstdint>
#include <cstring>
#include <memory>

#include "h3/quic_endpoint.hpp"
#include "net/connection_budget.hpp"
#include "quic_client.hpp"
#include "support.hpp"
#include "worker_fixture.hpp"

namespace {

using namespace floodgate;
using udp = boost::asio::ip::udp;

const std::string kConfig = std::string(R"(
server:
  listen:
    - address: "127.0.0.1:8443"
      protocols: [h3, h2]
      tls:
        certificates:
          - { cert: ")") + FLOODGATE_SOURCE_DIR +
                            "/config/examples/tls/shop.pem\", key: \"" + FLOODGATE_SOURCE_DIR +
                            R"(/config/examples/tls/shop.key" }
  max_header_bytes: 4KiB
  max_body_bytes: 64KiB
  http2: { max_concurrent_streams: 16, max_resets_per_second: 20 }
  timeouts: { header_read: 1s, idle: 1s }
log: { access_log: true }
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
  - name: site
    match: { path_prefix: / }
    upstream: origin
)";

struct Fixture {
  boost::asio::io_context ioc;
  fuzz::WorkerFixture worker{ioc, fuzz::load_fixture(kConfig, "fuzz-h3.yaml")};
  http::Services& w = worker.w;
  http::ConnectionBudget budget;
  http::QuicSecret secret{};
};

// Runs the endpoint's loop until nothing is ready.
void settle(boost::asio::io_context& ioc) {
  ioc.poll();
  ioc.restart();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture fx;
  if (size == 0) return 0;
  udp::socket socket(fx.ioc, udp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const auto port = socket.local_endpoint().port();
  const auto& listener = fx.w.snapshot()->server.listen.front();
  http::QuicEndpoint endpoint(std::move(socket), 0, fx.secret, 0, listener.tls->quic, fx.w,
                              fx.budget);
  boost::asio::co_spawn(fx.ioc, endpoint.run(), [](std::exception_ptr) {});
  settle(fx.ioc);
  {
    testing::QuicSocket client_socket(port);
    if (data[0] % 2 == 0) {
      for (std::size_t at = 1; at + 2 <= size;) {
        const std::size_t len =
            std::min<std::size_t>((data[at] << 8) | data[at + 1], size - at - 2);
        client_socket.send(data + at + 2, len);
        at += 2 + len;
        settle(fx.ioc);
      }
    } else {
      testing::QuicClient client(client_socket);
      if (client.init()) {
        for (int i = 0; i < 200 && !client.handshake_done() && client.poll_once(); ++i)
          settle(fx.ioc);
        if (client.handshake_done() && client.send_raw_stream(data + 1, size - 1))
          for (int i = 0; i < 50 && client.poll_once(); ++i) settle(fx.ioc);
      }
    }
  }
  // Every connection ends; the endpoint then closes its socket and its loop returns.
  endpoint.close();
  fx.w.sessions.abort_all();
  for (int i = 0; i < 100000 && (endpoint.looping() || fx.w.sessions.size() > 0); ++i)
    if (fx.ioc.run_one_for(std::chrono::milliseconds(50)) == 0) fx.w.sessions.abort_all();
  settle(fx.ioc);
  fx.worker.upstreams.pool.clear();
  return 0;
}
