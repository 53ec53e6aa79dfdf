// Connection limits at accept: at server.max_connections a new connection waits in the
// listen queue (neither refused nor accepted and dropped) until one closes; out of file
// descriptors the accept loop pauses and says so once a second, instead of spinning on
// accept() and logging each failure.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "harness.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;

std::uint64_t series_value(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return UINT64_MAX;
  return std::stoull(text.substr(at + series.size() + 2));
}

const std::string kRequest = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";

TEST(Abuse, MaxConnectionsHoldsTheExtraConnectionUntilOneCloses) {
  Origin origin;
  // Two workers, one budget: the cap is for the instance, whichever worker a connection hits.
  Proxy proxy(one_route_config(origin, "  threads: 2\n  max_connections: 3\n"));
  std::vector<std::unique_ptr<Client>> open;
  for (int i = 0; i < 3; ++i) {
    open.push_back(std::make_unique<Client>(proxy.port()));
    auto r = open.back()->request(kRequest);
    ASSERT_TRUE(r) << "connection " << i;
    EXPECT_EQ(r->result_int(), 200);
  }
  // The kernel completes the handshake (listen queue), but nobody reads the request.
  Client extra(proxy.port());
  extra.send(kRequest);
  EXPECT_FALSE(extra.read_response(400ms)) << "served beyond max_connections";
  EXPECT_FALSE(extra.closed_by_peer(0ms)) << "refused instead of held";
  auto paused = series_value(admin::render_prometheus(proxy.metrics()),
                             R"(floodgate_accept_pauses_total{reason="max_connections"})");
  EXPECT_TRUE(paused >= 1 && paused != UINT64_MAX) << paused;

  open.front().reset();  // one closes: the waiting one is served
  auto late = extra.read_response(2s);
  ASSERT_TRUE(late) << "the held connection was not served after one closed";
  EXPECT_EQ(late->result_int(), 200);
  open.back().reset();
  auto normal = get(proxy.port(), "/normal");
  ASSERT_TRUE(normal);
  EXPECT_EQ(normal->result_int(), 200);
}

// The lowest descriptor number free now; with RLIMIT_NOFILE set to it, no new one can be had.
int lowest_free_fd() {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ::close(fd);
  return fd;
}

std::size_t count_containing(const std::vector<std::string>& lines, const std::string& what) {
  std::size_t n = 0;
  for (const auto& l : lines) n += l.find(what) != std::string::npos ? 1 : 0;
  return n;
}

TEST(Abuse, OutOfDescriptorsPausesAcceptingAndLogsOncePerSecond) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer runtimes need descriptors too (UBSan's vptr check probes memory through a
  // pipe and reports a false error when it cannot open one).
  GTEST_SKIP() << "not under a sanitizer: this process runs out of descriptors on purpose";
#endif
  Origin origin;
  LogCapture log;
  Proxy proxy(one_route_config(origin, "  threads: 1\n"), nullptr, nullptr, log.logger());
  ASSERT_EQ(get(proxy.port(), "/warm")->result_int(), 200);
  // The clients' sockets exist before the limit drops; connecting needs no new descriptor,
  // accepting does.
  asio::io_context ioc;
  std::vector<tcp::socket> clients;
  clients.reserve(3);
  for (int i = 0; i < 3; ++i) clients.emplace_back(ioc).open(tcp::v4());
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free_fd());
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), proxy.port());
  boost::system::error_code ec;
  for (auto& c : clients) c.connect(ep, ec);
  std::this_thread::sleep_for(1300ms);  // accept() fails with EMFILE all along
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_FALSE(ec) << ec.message();

  // Paused, not spinning: a few pauses a second, a line at most once a second.
  auto pauses = series_value(admin::render_prometheus(proxy.metrics()),
                             R"(floodgate_accept_pauses_total{reason="resources"})");
  EXPECT_TRUE(pauses >= 1 && pauses <= 20) << pauses;
  auto lines = count_containing(log.lines(), "accept failed");
  EXPECT_GE(lines, 1u);
  EXPECT_LE(lines, 2u) << "accept failures were logged more than once a second";
  // And once descriptors are back, the waiting connections are served.
  for (auto& c : clients) {
    asio::write(c, asio::buffer(kRequest), ec);
    ASSERT_FALSE(ec) << ec.message();
    timeval tv{5, 0};
    setsockopt(c.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    beast::flat_buffer buffer;
    Response res;
    bhttp::read(c, buffer, res, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(res.result_int(), 200);
  }
}

}  // namespace
}  // namespace floodgate::testing
