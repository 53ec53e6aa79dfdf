// redis::Connection on its own, against a server the test writes byte by byte (real loopback
// sockets): replies are read by floodgate and parsed by hiredis's reader, matched to commands
// in order whatever the reads' boundaries; a late reply goes to its timed-out command, not to
// the next; a reply nobody asked for, or one that grows past the bound, drops the connection
// (hiredis's own async client aborts the process on the first); a callback may reset it.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "store/redis/redis_connection.hpp"

namespace floodgate::store::redis {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The server side: accepts connections and writes what the test says, on the test's thread
// (blocking calls; the client runs between them).
struct Server {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  tcp::socket peer{ioc};

  std::uint16_t port() const { return acceptor.local_endpoint().port(); }
  void accept() {
    peer = tcp::socket(ioc);
    acceptor.accept(peer);
  }
  void write(const std::string& bytes) { asio::write(peer, asio::buffer(bytes)); }
  // Whether a new connection comes within `timeout` while `client` runs.
  bool accepts_again(asio::io_context& client, std::chrono::milliseconds timeout) {
    acceptor.non_blocking(true);
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      client.run_for(10ms);
      boost::system::error_code ec;
      tcp::socket next(ioc);
      acceptor.accept(next, ec);
      if (!ec) {
        peer = std::move(next);
        return true;
      }
    }
    return false;
  }
};

struct Client {
  asio::io_context ioc;
  spdlog::logger log{"t", std::make_shared<spdlog::sinks::null_sink_mt>()};
  std::shared_ptr<Connection> conn;

  explicit Client(std::uint16_t port) {
    conn = std::make_shared<Connection>(ioc, ConnectionOptions{"127.0.0.1", port}, log);
    conn->start();
  }
  ~Client() { conn->stop(); }
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
    const auto until = Clock::now() + timeout;
    while (!done() && Clock::now() < until) ioc.run_for(5ms);
    return done();
  }
};

// What a callback saw, as text: "ok:abc", "ok:7", "timeout", "disconnected".
std::string seen(const redisReply* r, CommandStatus s) {
  if (s == CommandStatus::timeout) return "timeout";
  if (s == CommandStatus::disconnected) return "disconnected";
  if (r->type == REDIS_REPLY_INTEGER) return "ok:" + std::to_string(r->integer);
  return "ok:" + std::string(r->str, r->len);
}

struct Fixture {
  Server server;
  std::vector<std::string> got;  // before the client: its stop() may still report to it
  Client client{server.port()};

  Fixture() {
    server.accept();
    EXPECT_TRUE(client.run_until([&] { return client.conn->connected(); }));
  }
  bool send(const std::string& key, std::chrono::milliseconds within = 5s) {
    return client.conn->command(
        {"GET", key}, Clock::now() + within,
        [this](const redisReply* r, CommandStatus s) { got.push_back(seen(r, s)); });
  }
};

TEST(RedisConnection, RepliesSplitAtEveryByteOrSharingAReadReachTheirCommandsInOrder) {
  Fixture f;
  ASSERT_TRUE(f.send("a"));
  ASSERT_TRUE(f.send("b"));
  ASSERT_TRUE(f.send("c"));
  f.client.ioc.run_for(20ms);  // the three commands leave in one write
  for (char c : std::string("$3\r\nabc\r\n")) {
    f.server.write(std::string(1, c));
    f.client.ioc.run_for(2ms);
  }
  f.server.write(":7\r\n+OK\r\n");  // two replies in one write
  EXPECT_TRUE(f.client.run_until([&] { return f.got.size() == 3; }));
  EXPECT_EQ(f.got, (std::vector<std::string>{"ok:abc", "ok:7", "ok:OK"}));
  EXPECT_TRUE(f.client.conn->connected());
}

TEST(RedisConnection, ALateReplyGoesToItsTimedOutCommandNotToTheNext) {
  Fixture f;
  ASSERT_TRUE(f.send("slow", 30ms));
  ASSERT_TRUE(f.send("next"));
  EXPECT_TRUE(f.client.run_until([&] { return f.got.size() == 1; }));
  f.server.write("$4\r\nlate\r\n$4\r\nmine\r\n");
  EXPECT_TRUE(f.client.run_until([&] { return f.got.size() == 2; }));
  EXPECT_EQ(f.got, (std::vector<std::string>{"timeout", "ok:mine"}));
}

TEST(RedisConnection, AReplyToNoCommandDropsTheConnectionAndItComesBack) {
  Fixture f;
  f.server.write("+OK\r\n");
  EXPECT_TRUE(f.client.run_until([&] { return !f.client.conn->connected(); }));
  EXPECT_TRUE(f.server.accepts_again(f.client.ioc, 5s));
  EXPECT_TRUE(f.client.run_until([&] { return f.client.conn->connected(); }));
  ASSERT_TRUE(f.send("a"));
  f.client.ioc.run_for(20ms);
  f.server.write("$1\r\nx\r\n");
  EXPECT_TRUE(f.client.run_until([&] { return f.got.size() == 1; }));
  EXPECT_EQ(f.got, (std::vector<std::string>{"ok:x"}));
}

TEST(RedisConnection, AReplyThatGrowsPastTheBoundDropsTheConnection) {
  Fixture f;
  ASSERT_TRUE(f.send("huge", 120s));  // "disconnected", never "timeout", however slow the host
  f.client.ioc.run_for(20ms);
  // A bulk string announced at 1 GB, sent 1 MiB at a time from another thread: the
  // connection is dropped once 1 MiB waits unparsed, long before the announcement.
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    boost::system::error_code ec;
    asio::write(f.server.peer, asio::buffer(std::string("$1000000000\r\n")), ec);
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 100 && !ec && !stop; ++i)
      asio::write(f.server.peer, asio::buffer(chunk), ec);
  });
  EXPECT_TRUE(f.client.run_until([&] { return !f.got.empty(); }, 20s));
  stop = true;
  boost::system::error_code ignored;
  f.server.peer.shutdown(tcp::socket::shutdown_both, ignored);
  writer.join();
  EXPECT_EQ(f.got, (std::vector<std::string>{"disconnected"}));
}

TEST(RedisConnection, CommandsLargerThanTheSocketBufferLeaveWholeAndInOrder) {
  Fixture f;
  // 8 MiB of commands in one turn (the direct write takes what the socket buffer holds, an
  // asynchronous write the rest), and more queued while that write is under way.
  const std::string value(4096, 'v');
  std::string expected;
  for (int i = 0; i < 2048; ++i) {
    const auto key = "k" + std::to_string(i);
    append_command(expected, {"SET", key, value});
    ASSERT_TRUE(f.client.conn->command({"SET", key, value}, Clock::now() + 60s,
                                       [](const redisReply*, CommandStatus) {}));
  }
  f.client.ioc.run_for(5ms);
  for (int i = 0; i < 16; ++i) {
    const auto key = "late" + std::to_string(i);
    append_command(expected, {"SET", key, value});
    ASSERT_TRUE(f.client.conn->command({"SET", key, value}, Clock::now() + 60s,
                                       [](const redisReply*, CommandStatus) {}));
  }
  std::string received(expected.size(), '\0');
  std::thread reader([&] {
    boost::system::error_code ec;
    asio::read(f.server.peer, asio::buffer(received), ec);
  });
  std::atomic<bool> done{false};
  std::thread waker([&] {
    reader.join();
    done = true;
  });
  EXPECT_TRUE(f.client.run_until([&] { return done.load(); }, 60s));
  waker.join();
  EXPECT_TRUE(received == expected) << "the bytes sent differ from the commands queued";
}

TEST(RedisConnection, ACallbackMayResetTheConnection) {
  Fixture f;
  ASSERT_TRUE(f.client.conn->command({"GET", "a"}, Clock::now() + 5s,
                                     [&](const redisReply* r, CommandStatus s) {
                                       f.got.push_back(seen(r, s));
                                       f.client.conn->reset();
                                     }));
  ASSERT_TRUE(f.send("b"));
  f.client.ioc.run_for(20ms);
  f.server.write("$1\r\na\r\n$1\r\nb\r\n");
  EXPECT_TRUE(f.client.run_until([&] { return f.got.size() == 2; }));
  EXPECT_EQ(f.got, (std::vector<std::string>{"ok:a", "disconnected"}));
  EXPECT_TRUE(f.server.accepts_again(f.client.ioc, 5s));
}

}  // namespace
}  // namespace floodgate::store::redis
