// HTTP/3 and QUIC floods against the real binary (issue 40, item 3), each ending as
// docs/configuration.md says: a hostile client written with the same libraries
// (tests/support/h3_flood.cpp) for what gtlsclient cannot be made to do, and raw UDP datagrams
// for what needs no QUIC state at all.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <array>
#include <filesystem>
#include <iostream>

#include "floodgate_process.hpp"
#include "proxy_yaml.hpp"
#include "redis_server.hpp"
#include "test_pki.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

// The binary, one worker, a TLS listener speaking h3 beside h2, in front of the origin.
struct QuicBinary {
  Origin origin;
  TestPki pki;
  TestPki::Files cert = pki.issue("localhost", {"localhost"}, {"127.0.0.1"});
  std::uint16_t port = free_port();
  std::uint16_t admin = free_port();
  std::string path;
  std::unique_ptr<ChildProcess> fg;

  explicit QuicBinary(const std::string& server_extra = "") {
    path = write_temp_file(
        "h3-floods-" + std::to_string(port) + ".yaml",
        "server:\n  threads: 1\n  listen:\n    - { address: \"127.0.0.1:" + std::to_string(port) +
            "\", protocols: [h3, h2], tls: { certificates: [{ cert: \"" + cert.chain +
            "\", key: \"" + cert.key + "\" }] } }\n" + server_extra +
            "admin: { listen: \"127.0.0.1:" + std::to_string(admin) +
            "\" }\nlog: { level: error }\nupstreams:\n  origin: { url: \"" + http_url(origin) +
            "\" }\nroutes:\n  - name: all\n    match: { path_prefix: / }\n    upstream: origin\n");
    fg = start_floodgate(path);
    wait_serving(admin, "/healthz");
  }
  ~QuicBinary() {
    fg.reset();
    std::filesystem::remove(path);
  }
  std::uint64_t counter(const std::string& series) {
    auto r = get(admin, "/metrics");
    return r ? metric(r->body(), series) : UINT64_MAX;
  }
};

boost::json::object quic_flood(std::uint16_t port, const std::string& args) {
  // Appended piece by piece: GCC 12's -Warray-bounds misreads a chain of + on temporaries.
  std::string command = FLOODGATE_H3_FLOOD_BINARY;
  command += ' ';
  command += std::to_string(port);
  command += ' ';
  command += args;
  auto out = command_output(command, 60);
  boost::system::error_code ec;
  auto v = boost::json::parse(out, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << args << ": " << out;
    return {};
  }
  return v.as_object();
}

std::int64_t field_of(const boost::json::object& o, const char* name) {
  auto* v = o.if_contains(name);
  return v && v->is_int64() ? v->as_int64() : -1;
}

// One datagram to the listener and the answer, if one comes within a second.
std::string udp_exchange(std::uint16_t port, const std::string& datagram) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  pollfd pfd{fd, POLLIN, 0};
  std::string answer;
  if (poll(&pfd, 1, 1000) > 0) {
    std::array<char, 2048> buf;
    const auto n = recv(fd, buf.data(), buf.size(), 0);
    if (n > 0) answer.assign(buf.data(), static_cast<std::size_t>(n));
  }
  close(fd);
  return answer;
}

// 400 Initials of 400 connections, never continued, from one address: past 256 handshakes
// under way the worker asks for a Retry instead of starting another, and every one of those it
// started ends at timeouts.header_read (5 s: longer than the flood takes), its slot given back.
TEST(Http3Floods, HandshakesPastTheBoundAreAskedToRetryAndTheRestTimeOut) {
  QuicBinary b("  timeouts: { header_read: 5s }\n");
  auto r = quic_flood(b.port, "handshakes 400");
  std::cout << "handshakes: " << boost::json::serialize(r)
            << "; open after it: " << b.counter("floodgate_active_connections")
            << ", timed out: " << b.counter("floodgate_http3_handshake_timeouts_total") << "\n";
  EXPECT_EQ(field_of(r, "retries"), 400 - 256);
  EXPECT_EQ(b.counter("floodgate_http3_retries_total"), 400u - 256u);
  // Each started handshake is given up at the timeout: nothing is left open.
  EXPECT_TRUE(eventually([&] { return b.counter("floodgate_active_connections") == 0; }, 10s))
      << b.counter("floodgate_active_connections") << " connections still open";
  EXPECT_EQ(b.counter("floodgate_http3_handshake_timeouts_total"), 256u);
}

// Before a client's address is validated, floodgate sends at most three times what it
// received (RFC 9000 8.1), however long the client stays silent.
TEST(Http3Floods, AnUnvalidatedClientGetsAtMostThreeTimesWhatItSent) {
  QuicBinary b;
  auto r = quic_flood(b.port, "amplify");
  std::cout << "amplify: " << boost::json::serialize(r) << "\n";
  ASSERT_GT(field_of(r, "bytes_out"), 0);
  EXPECT_GT(field_of(r, "bytes_in"), 0);  // the server did answer
  EXPECT_LE(field_of(r, "bytes_in"), 3 * field_of(r, "bytes_out"));
}

// Rapid reset: streams the client opens and resets at once are charged to the connection's
// reset budget (server.http2.max_resets_per_second, 20 here); past it the connection is closed
// with H3_EXCESSIVE_LOAD, and the origin sees few of the requests.
TEST(Http3Floods, RapidResetsEndTheConnectionWithExcessiveLoad) {
  QuicBinary b("  http2: { max_resets_per_second: 20 }\n");
  get(b.origin.port(), "/__reset");
  auto r = quic_flood(b.port, "resets 2000");
  std::cout << "resets: " << boost::json::serialize(r) << "\n";
  EXPECT_TRUE(r.contains("closed_by_server") && r.at("closed_by_server").as_bool());
  EXPECT_EQ(field_of(r, "close_code"), 0x0107);  // H3_EXCESSIVE_LOAD
  EXPECT_LT(field_of(r, "opened"), 2000);
  EXPECT_EQ(b.counter("floodgate_http3_flood_closes_total"), 1u);
  EXPECT_LE(b.origin.requests(), 200u);
}

// A connection that goes quiet after its handshake is dropped at timeouts.idle (QUIC's idle
// timeout: ngtcp2's default would be none).
TEST(Http3Floods, AnIdleConnectionEndsAtTheIdleTimeout) {
  QuicBinary b("  timeouts: { idle: 2s }\n");
  ChildProcess quiet({FLOODGATE_H3_FLOOD_BINARY, std::to_string(b.port), "idle", "8"});
  ASSERT_TRUE(eventually([&] { return b.counter("floodgate_active_connections") == 1; }, 3s));
  const auto opened = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return b.counter("floodgate_active_connections") == 0; }, 5s));
  const auto held = std::chrono::steady_clock::now() - opened;
  EXPECT_GE(held, 1s);  // not at once: at the idle timeout
}

// A reader that takes nothing: a 1 MB response to a client whose 16 KiB stream window never
// reopens waits at most timeouts.idle (2 s) without progress, then the stream is reset and its
// upstream work ends.
TEST(Http3Floods, AStalledReaderIsResetAfterTheIdleTimeout) {
  QuicBinary b("  timeouts: { idle: 2s }\n");
  auto r = quic_flood(b.port, "stall 8");
  std::cout << "stall: " << boost::json::serialize(r) << "\n";
  EXPECT_TRUE(r.contains("stream_closed") && r.at("stream_closed").as_bool());
  EXPECT_GE(field_of(r, "after_ms"), 1500);
  EXPECT_LT(field_of(r, "after_ms"), 6000);
  EXPECT_EQ(b.counter("floodgate_http3_stalled_streams_total"), 1u);
}

// Datagrams that need no connection: an empty one is dropped; another QUIC version gets
// Version Negotiation naming v1;
// a short-header packet for a connection ID of this worker's that no connection holds gets a
// stateless reset smaller than itself; one for another worker's is left alone.
TEST(Http3Floods, VersionNegotiationAndStatelessResets) {
  QuicBinary b;
  // An empty datagram first: ngtcp2 asserts on one (fuzz_quic found it aborting the process);
  // it is dropped, and everything below is answered by the same process.
  EXPECT_TRUE(udp_exchange(b.port, "").empty());
  // A long header, a version no one speaks (0x?a?a?a?a is reserved for that), DCID and SCID.
  std::string initial(1200, '\0');
  initial[0] = static_cast<char>(0xc0);
  initial.replace(1, 4, "\x1a\x2a\x3a\x4a");
  initial[5] = 8;
  initial.replace(6, 8, "dcid-one");
  initial[14] = 8;
  initial.replace(15, 8, "scid-one");
  const auto vn = udp_exchange(b.port, initial);
  ASSERT_GE(vn.size(), 7u + 8 + 8 + 4);
  EXPECT_EQ(vn.substr(1, 4), std::string("\0\0\0\0", 4));  // version 0: Version Negotiation
  EXPECT_NE(vn.find(std::string("\0\0\0\1", 4), 5), std::string::npos) << "v1 is offered";

  // A short header (0x40 set, 0x80 clear) with an 18-byte DCID whose first byte is worker 0's.
  std::string stray(100, 'x');
  stray[0] = 0x41;
  stray[1] = 0;
  const auto reset = udp_exchange(b.port, stray);
  ASSERT_FALSE(reset.empty()) << "no stateless reset";
  EXPECT_LT(reset.size(), stray.size());
  EXPECT_GE(reset.size(), 21u);  // at least 5 random bytes and the 16-byte token after the first
  EXPECT_EQ(static_cast<unsigned char>(reset[0]) & 0xc0, 0x40);
  stray[1] = 7;  // a worker this instance does not have
  EXPECT_TRUE(udp_exchange(b.port, stray).empty());
}

}  // namespace
}  // namespace floodgate::testing
