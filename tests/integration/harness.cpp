#include "harness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <regex>

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include <mutex>
#include <stdexcept>
#include <thread>

#include "app/stores.hpp"
#include "test_library.hpp"
#include "tls_client.hpp"

namespace floodgate::testing {

ChildProcess::ChildProcess(std::vector<std::string> argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  out_fd_ = fds[0];
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !signal_and_wait(SIGTERM, std::chrono::seconds(5))) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

std::string ChildProcess::read_line(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    char buf[256];
    auto n = read(out_fd_, buf, sizeof buf);
    if (n <= 0) return "";
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

std::optional<int> ChildProcess::signal_and_wait(int sig, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  kill(pid_, sig);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    usleep(10'000);
  }
  return std::nullopt;
}

namespace {
std::vector<std::string> origin_argv(const std::string& tls_cert, const std::string& tls_key,
                                     std::uint16_t port = 0) {
  std::vector<std::string> argv = {FLOODGATE_ORIGIN_BINARY, "--port", std::to_string(port)};
  if (!tls_cert.empty()) argv.insert(argv.end(), {"--tls-cert", tls_cert, "--tls-key", tls_key});
  return argv;
}
}  // namespace

Origin::Origin() : Origin("", "") {}

Origin::Origin(std::uint16_t port) : process_(origin_argv("", "", port)) {
  auto line = process_.read_line(std::chrono::seconds(10));
  if (line.empty()) throw std::runtime_error("the test origin did not start on its port");
  port_ = static_cast<std::uint16_t>(std::stoi(line));
}

Origin::Origin(const std::string& tls_cert, const std::string& tls_key)
    : process_(origin_argv(tls_cert, tls_key)), tls_(!tls_cert.empty()) {
  auto line = process_.read_line(std::chrono::seconds(10));
  if (line.empty()) throw std::runtime_error("the test origin did not start");
  port_ = static_cast<std::uint16_t>(std::stoi(line));
}

std::string Origin::stats() {
  auto r = tls_ ? tls_get(port_, "/__stats") : get(port_, "/__stats");
  return r ? r->body() : "";
}

namespace {
std::uint64_t json_number(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in " + json);
  return std::stoull(json.substr(at + key.size() + 3));
}
}  // namespace

std::uint64_t Origin::requests() {
  return json_number(stats(), "requests");
}
std::uint64_t Origin::connections() {
  return json_number(stats(), "connections");
}

std::string without_request_id(const std::string& body) {
  static const std::regex id(
      R"( \(request id [0-9A-Za-z._:-]+\)|,"request_id":"[0-9A-Za-z._:-]+")");
  return std::regex_replace(body, id, "");
}

std::string substitute(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string one_route_config(const Origin& origin, const std::string& server_extra,
                             const std::string& upstream_extra) {
  return "server:\n  listen: [127.0.0.1:0]\n" + server_extra +
         "upstreams:\n  origin: { url: \"http://127.0.0.1:" + std::to_string(origin.port()) + "\"" +
         (upstream_extra.empty() ? "" : ", " + upstream_extra) +
         " }\nroutes:\n  - name: all\n    match: { path_prefix: / }\n    upstream: origin\n";
}

config::ConfigPtr load_or_fail(const std::string& yaml) {
  auto r = config::load_config_text(yaml, "test.yaml", config::process_env());
  for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
  if (!r.config) throw std::runtime_error("test config rejected");
  return r.config;
}

class LogCapture::Sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

LogCapture::LogCapture()
    : sink_(std::make_shared<Sink>()),
      logger_(std::make_shared<spdlog::logger>("captured", sink_)) {
  logger_->set_level(spdlog::level::info);
}

std::vector<std::string> LogCapture::lines() const {
  return sink_->lines();
}

bool LogCapture::wait_for(std::size_t n, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (sink_->lines().size() < n) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

Proxy::Proxy(const std::string& yaml, const limit::Clock* clock,
             std::shared_ptr<spdlog::logger> access_log, std::shared_ptr<spdlog::logger> log,
             bool clock_drives_redis)
    : access_log_(std::move(access_log)) {
  if (!clock) clock = &system_clock_;
  source_ = std::make_unique<config::ConfigSource>(load_or_fail(yaml));
  memory_ = std::make_unique<store::MemoryState>(*clock, source_->get()->store.max_keys);
  metrics_.memory_evictions = [this] { return memory_->evictions(); };
  if (!log) {
    log =
        std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    log->set_level(spdlog::level::err);
  }
  jwks_ = std::make_unique<app::JwksRefresher>(*source_, metrics_, log);
  jwks_->start();
  server_ = std::make_unique<http::Server>(
      *source_, log,
      http::ServerDeps{
          *clock,
          app::configured_store_factory(
              *source_->get(), *memory_, leases_, *clock, log,
              clock_drives_redis ? store::RedisStoreOptions::TestTime{clock, test_library_body()}
                                 : store::RedisStoreOptions::TestTime{}),
          app::memory_store_factory(*memory_), metrics_, access_log_.get(), nullptr,
          &jwks_->cell()});
  server_->start();
  metrics_.store_health = [this] { return server_->store_health(); };
  metrics_.upstream_servers = [this] { return server_->upstream_servers(); };
  port_ = server_->ports().at(0);
}

Proxy::~Proxy() {
  server_->drain(std::chrono::milliseconds(100));
}

void Proxy::drain(std::chrono::milliseconds grace) {
  server_->drain(grace);
}

Client::Client(std::uint16_t port) {
  socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  socket_.set_option(tcp::no_delay(true));
}

void Client::send(std::string_view bytes) {
  asio::write(socket_, asio::buffer(bytes));
}

namespace {
// Runs `op` on the client's io_context for at most `timeout`; cancels it past that.
template <typename Op>
boost::system::error_code run_with_timeout(asio::io_context& ioc, tcp::socket& s,
                                           std::chrono::milliseconds timeout, Op op) {
  boost::system::error_code result = asio::error::would_block;
  op([&](boost::system::error_code ec, std::size_t) { result = ec; });
  ioc.restart();
  ioc.run_for(timeout);
  if (result == asio::error::would_block) {
    s.cancel();
    ioc.restart();
    ioc.run();
    return asio::error::timed_out;
  }
  return result;
}
}  // namespace

std::optional<Response> Client::read_response(std::chrono::milliseconds timeout, bool head) {
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(boost::none);
  p.skip(head);
  auto ec = run_with_timeout(ioc_, socket_, timeout, [&](auto handler) {
    bhttp::async_read(socket_, buffer_, p, handler);
  });
  if (ec) return std::nullopt;
  return p.release();
}

std::optional<Response> Client::request(std::string_view raw) {
  send(raw);
  return read_response();
}

bool Client::closed_by_peer(std::chrono::milliseconds timeout) {
  if (buffer_.size() != 0) return false;
  // poll + peek on the raw socket: EOF (0) or a reset means closed; data means not.
  pollfd p{socket_.native_handle(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char byte;
  auto n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

std::string Client::read_raw(std::size_t n, std::chrono::milliseconds timeout) {
  std::string out;
  auto ec = run_with_timeout(ioc_, socket_, timeout, [&](auto handler) {
    asio::async_read(socket_, asio::dynamic_buffer(out), asio::transfer_exactly(n), handler);
  });
  (void)ec;
  return out;
}

std::optional<Response> get(std::uint16_t port, const std::string& target,
                            const std::string& extra_headers) {
  Client c(port);
  return c.request("GET " + target + " HTTP/1.1\r\nHost: test\r\n" + extra_headers + "\r\n");
}

std::map<int, int> burst(const std::vector<std::uint16_t>& ports, const std::string& target,
                         int n) {
  asio::io_context ioc;
  std::map<int, int> statuses;
  struct Conn {
    tcp::socket socket;
    std::string request;
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> response;
  };
  std::vector<std::unique_ptr<Conn>> conns;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<Conn>(
        Conn{tcp::socket(ioc),
             "GET " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
             {},
             {}});
    auto* raw = c.get();
    auto port = ports[static_cast<std::size_t>(i) % ports.size()];
    raw->socket.async_connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), [raw, &statuses](auto ec) {
          if (ec) return void(++statuses[-1]);
          asio::async_write(raw->socket, asio::buffer(raw->request),
                            [raw, &statuses](auto ec, std::size_t) {
                              if (ec) return void(++statuses[-2]);
                              bhttp::async_read(raw->socket, raw->buffer, raw->response,
                                                [raw, &statuses](auto ec, std::size_t) {
                                                  ++statuses[ec ? -3 : raw->response.result_int()];
                                                });
                            });
        });
    conns.push_back(std::move(c));
  }
  ioc.run_for(std::chrono::seconds(30));
  return statuses;
}

std::string command_output(const std::string& command, int timeout_seconds) {
  std::string cmd = "timeout " + std::to_string(timeout_seconds) + " " + command + " 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (auto n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace floodgate::testing
