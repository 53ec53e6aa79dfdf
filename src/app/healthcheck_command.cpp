#include "healthcheck_command.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>

namespace floodgate::app {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr int kHealthy = 0;
constexpr int kUnhealthy = 1;
constexpr int kUsage = 2;
constexpr auto kTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxAnswer = 64 * 1024;  // /healthz answers a few bytes

struct Address {
  std::string host;
  std::string port;
};

// HOST:PORT or [IPv6]:PORT; the port is what follows the last colon.
bool split_address(std::string_view s, Address& out) {
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return false;
  auto host = s.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
  }
  out.host = std::string(host);
  out.port = std::string(s.substr(colon + 1));
  return true;
}

// The whole exchange is asynchronous so that one deadline (run_for) bounds the resolve, the
// connect, the write and the read: a listener that accepts and never answers fails the check.
struct Probe {
  asio::io_context ioc;
  tcp::resolver resolver{ioc};
  tcp::socket socket{ioc};
  std::string request;
  std::string answer;
  std::string failure;
  bool done = false;

  void start(const Address& a) {
    request = "GET /healthz HTTP/1.1\r\nHost: " + a.host + "\r\nConnection: close\r\n\r\n";
    resolver.async_resolve(a.host, a.port, [this](auto ec, const auto& endpoints) {
      if (ec) return fail("cannot resolve: " + ec.message());
      asio::async_connect(socket, endpoints, [this](auto ec2, const auto&) {
        if (ec2) return fail("cannot connect: " + ec2.message());
        asio::async_write(socket, asio::buffer(request), [this](auto ec3, std::size_t) {
          if (ec3) return fail("cannot send: " + ec3.message());
          read_more();
        });
      });
    });
  }

  void read_more() {
    auto at = answer.size();
    answer.resize(at + 4096);
    socket.async_read_some(asio::buffer(answer.data() + at, 4096),
                           [this, at](auto ec, std::size_t n) {
                             answer.resize(at + n);
                             if (ec == asio::error::eof || answer.size() >= kMaxAnswer)
                               return finish();
                             if (ec) return fail("cannot read: " + ec.message());
                             read_more();
                           });
  }

  void fail(std::string why) {
    failure = std::move(why);
    done = true;
  }
  void finish() { done = true; }
};

}  // namespace

int healthcheck_command(const std::vector<std::string_view>& args) {
  std::string_view target = "127.0.0.1:9901";
  if (const char* env = std::getenv("FLOODGATE_ADMIN_HEALTH"); env && *env) target = env;
  if (args.size() == 2) target = args[1];
  if (args.size() > 2) {
    std::cerr << "usage: floodgate healthcheck [HOST:PORT]\n";
    return kUsage;
  }
  Address a;
  if (!split_address(target, a)) {
    std::cerr << "floodgate healthcheck: '" << target << "' is not HOST:PORT\n";
    return kUsage;
  }
  Probe p;
  p.start(a);
  p.ioc.run_for(kTimeout);
  std::string where = "http://" + std::string(target) + "/healthz";
  if (!p.done) {
    std::cerr << "floodgate healthcheck: " << where << " did not answer within 2 s\n";
    // Leaving normally would destroy the io_context, which waits for a host name still being
    // resolved on Asio's resolver thread: a slow DNS would hold the check past its deadline.
    std::cerr.flush();
    std::_Exit(kUnhealthy);
  }
  if (!p.failure.empty()) {
    std::cerr << "floodgate healthcheck: " << where << ": " << p.failure << "\n";
    return kUnhealthy;
  }
  auto line = std::string_view(p.answer).substr(0, p.answer.find("\r\n"));
  if (line.size() >= 12 && line.substr(0, 5) == "HTTP/" && line.substr(8, 4) == " 200") {
    std::cout << where << ": " << line << "\n";
    return kHealthy;
  }
  std::cerr << "floodgate healthcheck: " << where << " answered '" << line << "'\n";
  return kUnhealthy;
}

}  // namespace floodgate::app
