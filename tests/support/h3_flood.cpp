// A hostile HTTP/3 client for the flood tests (tests/integration/h3_floods_test.cpp): the
// things ngtcp2's example client cannot be made to do, done with the same libraries (ngtcp2's
// client side with its GnuTLS helper, nghttp3) over a plain UDP socket.
//
//   floodgate-h3-flood PORT handshakes N   N new connections' first Initial each, from one
//                                          socket, never continued; then 3 s of listening
//   floodgate-h3-flood PORT amplify        one connection's first flight, then 3 s of only
//                                          listening (nothing acknowledged)
//   floodgate-h3-flood PORT resets N       a handshake, then N request streams, each reset by
//                                          the client right after its HEADERS
//   floodgate-h3-flood PORT idle SECONDS   a handshake, then silence: when the server ends it
//   floodgate-h3-flood PORT stall SECONDS  a handshake, a GET of 1 MB whose response is never
//                                          taken (a 16 KiB window never reopened), the
//                                          connection kept alive by PINGs: whether and when
//                                          the server reset the stream
//
// Prints one JSON object: what was sent and received, and how the server ended the
// connection (the error code of its CONNECTION_CLOSE, or none). The certificate is not
// checked (the tests' own CA is not what this is about).

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

#include "quic_client.hpp"

namespace {

using floodgate::testing::QuicClient;
using floodgate::testing::QuicSocket;

long number(const char* text, long fallback) {
  long v = fallback;
  if (text) std::from_chars(text, text + std::strlen(text), v);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: floodgate-h3-flood PORT handshakes N|amplify|resets N|idle S\n");
    return 2;
  }
  const auto port = static_cast<std::uint16_t>(number(argv[1], 0));
  const std::string mode = argv[2];
  const long n = number(argc > 3 ? argv[3] : nullptr, 1);
  QuicSocket sock(port);
  std::array<std::uint8_t, 65536> buf;

  if (mode == "handshakes") {
    // Each a new connection: its first flight (the Initial with the ClientHello), then nothing.
    // Each waits for the server's first answer to it (up to 200 ms) before the next goes, so
    // that none is lost to the server's receive buffer: the point is handshakes under way, not
    // datagrams dropped.
    for (long i = 0; i < n; ++i) {
      QuicClient c(sock);
      if (!c.init() || !c.write()) return 1;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (std::chrono::steady_clock::now() < until) {
        const auto got = sock.receive(buf.data(), buf.size(), 20);
        if (got > 0 && c.addressed_to(buf.data(), got)) break;
      }
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < until) sock.receive(buf.data(), buf.size(), 50);
    std::printf("{\"sent\":%ld,\"bytes_out\":%llu,\"datagrams_in\":%llu,\"retries\":%llu}\n", n,
                static_cast<unsigned long long>(sock.bytes_out),
                static_cast<unsigned long long>(sock.datagrams_in),
                static_cast<unsigned long long>(sock.retries));
    return 0;
  }
  if (mode == "amplify") {
    QuicClient c(sock);
    if (!c.init() || !c.write()) return 1;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < until) sock.receive(buf.data(), buf.size(), 50);
    std::printf("{\"bytes_out\":%llu,\"bytes_in\":%llu,\"datagrams_in\":%llu}\n",
                static_cast<unsigned long long>(sock.bytes_out),
                static_cast<unsigned long long>(sock.bytes_in),
                static_cast<unsigned long long>(sock.datagrams_in));
    return 0;
  }
  QuicClient c(sock);
  if (!c.init(mode == "stall" ? 16 * 1024 : 1 << 20, mode == "stall") || !c.handshake(5000)) {
    std::printf("{\"handshake\":false}\n");
    return 1;
  }
  const auto authority = "localhost:" + std::to_string(port);
  if (mode == "resets") {
    long opened = 0;
    for (; opened < n && !c.over(); ++opened) {
      // When every stream the server allows is open, wait for it to allow more.
      while (!c.over() && !c.reset_request(authority)) c.pump(10);
      c.pump(0);
    }
    c.pump(2000);
    std::printf("{\"opened\":%ld,\"closed_by_server\":%s,\"close_code\":%llu}\n", opened,
                c.closed_by_server() ? "true" : "false",
                static_cast<unsigned long long>(c.close_code()));
    return 0;
  }
  if (mode == "stall") {
    // PINGs every 500 ms keep the connection itself alive (else QUIC's idle timeout would end
    // it first): only the stream stalls.
    c.keep_alive(500);
    if (!c.request(authority, "/bytes/1000000")) return 1;
    const auto start = std::chrono::steady_clock::now();
    while (!c.over() && c.streams_closed() == 0 &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(n))
      c.pump(50);
    std::printf("{\"stream_closed\":%s,\"after_ms\":%lld}\n",
                c.streams_closed() > 0 ? "true" : "false",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count()));
    return 0;
  }
  if (mode == "idle") {
    const auto start = std::chrono::steady_clock::now();
    // Listening only: nothing is sent (no PING), so the server's idle timer runs.
    const auto until = start + std::chrono::seconds(n);
    bool closed = false;
    while (std::chrono::steady_clock::now() < until && !closed) {
      const auto got = sock.receive(buf.data(), buf.size(), 50);
      (void)got;
    }
    std::printf("{\"listened_ms\":%lld,\"datagrams_in\":%llu}\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count()),
                static_cast<unsigned long long>(sock.datagrams_in));
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
