#include "fake_redis.hpp"

#include <boost/asio.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <thread>

namespace floodgate::testing {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// One complete RESP array of bulk strings from the front of `in`, or nullopt until more bytes
// arrive. Anything else from the client (floodgate only sends arrays) ends the connection.
enum class Parse { complete, incomplete, broken };

Parse take_command(std::string& in, std::vector<std::string>& out) {
  out.clear();
  std::size_t pos = 0;
  auto number = [&](char lead, long long& n) {
    if (pos >= in.size()) return Parse::incomplete;
    if (in[pos] != lead) return Parse::broken;
    auto end = in.find("\r\n", pos);
    if (end == std::string::npos) return Parse::incomplete;
    auto [p, ec] = std::from_chars(in.data() + pos + 1, in.data() + end, n);
    if (ec != std::errc{} || p != in.data() + end || n < 0) return Parse::broken;
    pos = end + 2;
    return Parse::complete;
  };
  long long count = 0;
  if (auto s = number('*', count); s != Parse::complete) return s;
  for (long long i = 0; i < count; ++i) {
    long long len = 0;
    if (auto s = number('$', len); s != Parse::complete) return s;
    if (in.size() < pos + static_cast<std::size_t>(len) + 2) return Parse::incomplete;
    out.emplace_back(in.substr(pos, static_cast<std::size_t>(len)));
    pos += static_cast<std::size_t>(len) + 2;
  }
  if (!out.empty())
    std::transform(out[0].begin(), out[0].end(), out[0].begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  in.erase(0, pos);
  return Parse::complete;
}

std::string integer(long long v) {
  return ":" + std::to_string(v) + "\r\n";
}

}  // namespace

struct FakeRedis::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  std::thread thread;
  mutable std::mutex mutex;
  Script script;
  std::map<std::string, std::uint64_t> counts;
  std::atomic<std::uint64_t> connections{0};

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket s) {
      if (ec) return;
      ++connections;
      read(std::make_shared<Peer>(std::move(s)));
      accept();
    });
  }

  struct Peer {
    explicit Peer(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    std::array<char, 16384> buffer{};
    std::string pending;
    bool stalled = false;
  };

  Answer answer(const std::vector<std::string>& command) {
    Script s;
    {
      std::lock_guard lock(mutex);
      ++counts[command.empty() ? "" : command[0]];
      s = script;
    }
    return s(command);
  }

  void read(const std::shared_ptr<Peer>& peer) {
    peer->socket.async_read_some(asio::buffer(peer->buffer),
                                 [this, peer](boost::system::error_code ec, std::size_t n) {
                                   if (ec) return;
                                   peer->pending.append(peer->buffer.data(), n);
                                   std::vector<std::string> command;
                                   std::string out;
                                   for (;;) {
                                     auto parsed = take_command(peer->pending, command);
                                     if (parsed == Parse::incomplete) break;
                                     if (parsed == Parse::broken)
                                       return;  // the socket closes with the peer
                                     auto a = answer(command);
                                     if (a.delay.count() > 0) std::this_thread::sleep_for(a.delay);
                                     if (a.stall) peer->stalled = true;
                                     if (!peer->stalled) out += a.bytes;
                                   }
                                   boost::system::error_code ignored;
                                   if (!out.empty())
                                     asio::write(peer->socket, asio::buffer(out), ignored);
                                   read(peer);
                                 });
  }
};

FakeRedis::FakeRedis() : FakeRedis(behave()) {}

FakeRedis::FakeRedis(Script script) : impl_(std::make_unique<Impl>()) {
  impl_->script = std::move(script);
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

FakeRedis::~FakeRedis() {
  impl_->io.stop();
  impl_->thread.join();
}

void FakeRedis::script(Script s) {
  std::lock_guard lock(impl_->mutex);
  impl_->script = std::move(s);
}

std::uint64_t FakeRedis::count(const std::string& command) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->counts.find(command);
  return it == impl_->counts.end() ? 0 : it->second;
}

std::uint64_t FakeRedis::connections() const {
  return impl_->connections.load();
}

std::string FakeRedis::admitted(const std::vector<std::vector<bool>>& requests,
                                std::int64_t granted) {
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::size_t total = 1;
  for (const auto& items : requests) {
    total += 1;
    for (bool leased : items) total += leased ? 5 : 4;
  }
  std::string out = "*" + std::to_string(total) + "\r\n" + integer(now);
  for (const auto& items : requests) {
    out += integer(1);
    for (bool leased : items) {
      out += integer(1) + integer(5) + integer(0) + integer(0);
      if (leased) out += integer(granted);
    }
  }
  return out;
}

// The items of an acquire call's requests, whether each has a holder (lua/acquire.lua: after
// the keys, now, then per request its lease id, its item count and per item 7 values, 3 more
// when its 7th, the holder, is not empty); empty if it is not one.
std::vector<std::vector<bool>> FakeRedis::acquire_requests(const std::vector<std::string>& c) {
  std::size_t keys = 0;
  if (c.size() < 3) return {};
  std::from_chars(c[2].data(), c[2].data() + c[2].size(), keys);
  std::vector<std::vector<bool>> out;
  std::size_t at = 3 + keys + 1;
  while (at + 1 < c.size()) {
    std::size_t n = 0;
    std::from_chars(c[at + 1].data(), c[at + 1].data() + c[at + 1].size(), n);
    if (n == 0) return {};
    at += 2;
    auto& items = out.emplace_back();
    for (std::size_t i = 0; i < n; ++i) {
      if (at + 7 > c.size()) return {};
      items.push_back(!c[at + 6].empty());
      at += items.back() ? 10 : 7;
    }
  }
  if (at != c.size()) return {};
  return out;
}

std::string FakeRedis::all_slots_to(std::uint16_t port) {
  return "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n" + integer(port);
}

FakeRedis::Script FakeRedis::behave(std::uint16_t slots_owner) {
  return [slots_owner](const std::vector<std::string>& c) -> Answer {
    const auto& name = c.empty() ? std::string() : c[0];
    if (name == "PING") return reply("+PONG\r\n");
    if (name == "AUTH" || name == "ASKING") return reply("+OK\r\n");
    if (name == "ZREM") return reply(integer(1));
    if (name == "CLUSTER")
      return reply(slots_owner ? all_slots_to(slots_owner)
                               : "-ERR This instance has cluster support disabled\r\n");
    if (name == "FUNCTION") return reply("$8\r\nfloodgate\r\n");
    if ((name == "FCALL" || name == "EVALSHA" || name == "EVAL") && c.size() >= 3) {
      // adjust: one or two keys and 6 or 9 arguments; an acquire call parses as one.
      auto requests = acquire_requests(c);
      if (requests.empty()) return reply(integer(1));
      return reply(admitted(requests));
    }
    return reply("-ERR unknown command\r\n");
  };
}

}  // namespace floodgate::testing
