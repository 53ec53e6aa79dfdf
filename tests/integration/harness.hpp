#pragma once
// Real parts for integration tests: an origin process, a floodgate server on an ephemeral
// port, and a raw-socket client that can send any bytes (including malformed ones).

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/jwks_refresher.hpp"
#include "floodgate/admin/prometheus.hpp"
#include "floodgate/config/config_source.hpp"
#include "floodgate/config/loader.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/server/server.hpp"
#include "floodgate/store/leased_store.hpp"
#include "floodgate/store/memory_store.hpp"

namespace floodgate::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using Response = bhttp::response<bhttp::string_body>;

// A child process with its stdout on a pipe; killed (SIGTERM, then SIGKILL) on destruction.
class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> argv);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  std::string read_line(std::chrono::milliseconds timeout);  // "" on timeout or EOF
  // Sends `sig` and waits for the exit status (nullopt if it did not exit in time).
  std::optional<int> signal_and_wait(int sig, std::chrono::milliseconds timeout);
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  int out_fd_ = -1;
  std::string pending_;
};

// floodgate-test-origin on an ephemeral port.
class Origin {
 public:
  Origin();
  // Serves HTTPS (TLS 1.2+) with this certificate (PEM; the file may hold the chain) and key;
  // the counters below are then read over TLS too.
  Origin(const std::string& tls_cert, const std::string& tls_key);
  // On this port (a server of a pool coming back where it was).
  explicit Origin(std::uint16_t port);
  std::uint16_t port() const { return port_; }
  bool tls() const { return tls_; }
  std::uint64_t requests();     // requests that reached it (stats and reset not counted)
  std::uint64_t connections();  // TCP connections it accepted
  std::string stats();          // the raw /__stats JSON

 private:
  ChildProcess process_;
  std::uint16_t port_ = 0;
  bool tls_ = false;
};

// An spdlog logger that keeps every message in memory, for the access log's JSON lines.
class LogCapture {
 public:
  LogCapture();
  const std::shared_ptr<spdlog::logger>& logger() const { return logger_; }
  std::vector<std::string> lines() const;
  // The session writes a request's line after its response: waits until `n` lines are in.
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout) const;

 private:
  class Sink;
  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

// An in-process floodgate serving `yaml` on the embedded store, reading `clock` (the
// system clock unless a test passes its own). The access log (when the config turns it on)
// goes to `access_log`, or is dropped; the server's own log to `log`, or errors to stderr.
class Proxy {
 public:
  // `clock_drives_redis`: a Redis store decides by `clock` too (the time is sent to the tests'
  // function library, test_library.hpp, as in the differential tests) instead of by Redis's
  // TIME, which the shipped library always reads.
  explicit Proxy(const std::string& yaml, const limit::Clock* clock = nullptr,
                 std::shared_ptr<spdlog::logger> access_log = nullptr,
                 std::shared_ptr<spdlog::logger> log = nullptr, bool clock_drives_redis = false);
  ~Proxy();
  // What SIGTERM does (Server::drain); returns once every worker has stopped.
  void drain(std::chrono::milliseconds grace);
  std::uint16_t port() const { return port_; }
  config::ConfigSource& source() { return *source_; }
  store::MemoryState& memory() { return *memory_; }
  metrics::Metrics& metrics() { return metrics_; }
  http::Server& server() { return *server_; }

 private:
  limit::SystemClock system_clock_;
  metrics::Metrics metrics_{"test", "itest"};
  std::unique_ptr<config::ConfigSource> source_;
  std::shared_ptr<spdlog::logger> access_log_;
  std::unique_ptr<store::MemoryState> memory_;
  store::LeaseBook leases_;                   // declared before server_: it outlives the workers
  std::unique_ptr<app::JwksRefresher> jwks_;  // jwt.jwks, as main runs it
  std::unique_ptr<http::Server> server_;
  std::uint16_t port_ = 0;
};

std::string substitute(std::string text, const std::string& from, const std::string& to);
// An answer of floodgate's own without its request id (" (request id X)" at the end of the
// line, or ,"request_id":"X" in a refusal's JSON): the part a test can compare.
std::string without_request_id(const std::string& body);

// What a shell command printed on stdout (stderr dropped), trailing newlines removed; it is
// killed after `timeout_seconds`.
std::string command_output(const std::string& command, int timeout_seconds);
// A proxy with one route, "all" (every path), to `origin`. `server_extra` is YAML lines under
// `server:` (two-space indented), `upstream_extra` more keys of the upstream's flow map.
std::string one_route_config(const Origin& origin, const std::string& server_extra = "",
                             const std::string& upstream_extra = "");
config::ConfigPtr load_or_fail(const std::string& yaml);

// A blocking client over one TCP connection, every operation bounded by a deadline.
class Client {
 public:
  explicit Client(std::uint16_t port);
  void send(std::string_view bytes);
  // Reads one response (nullopt if the connection closed or timed out first).
  std::optional<Response> read_response(std::chrono::milliseconds timeout = std::chrono::seconds(5),
                                        bool head = false);
  // Convenience: sends a request and reads its response.
  std::optional<Response> request(std::string_view raw);
  // True when the server closes the connection (EOF or reset) within `timeout` and sends
  // nothing more.
  bool closed_by_peer(std::chrono::milliseconds timeout);
  // Reads raw bytes until `n` arrive, EOF, or timeout.
  std::string read_raw(std::size_t n, std::chrono::milliseconds timeout);
  tcp::socket& socket() { return socket_; }

 private:
  asio::io_context ioc_;
  tcp::socket socket_{ioc_};
  beast::flat_buffer buffer_;
};

// Sends `n` requests at once over `n` connections spread over `ports`; counts statuses
// (negative: connect, write or read failures).
std::map<int, int> burst(const std::vector<std::uint16_t>& ports, const std::string& target, int n);

// One request on a new connection.
std::optional<Response> get(std::uint16_t port, const std::string& target,
                            const std::string& extra_headers = "");

}  // namespace floodgate::testing
