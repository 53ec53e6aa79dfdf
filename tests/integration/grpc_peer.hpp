#pragma once
// A real gRPC server and client for the tests (grpc/grpc_peer.py: Debian's python3-grpcio
// running the Echo service of grpc/echo.proto), shared by grpc_test.cpp and the tests of the
// real binary.

#include <boost/json.hpp>

#include <cstdint>
#include <string>

#include "harness.hpp"

namespace floodgate::testing {

// The Echo service on a free port of its own choosing.
class GrpcServer {
 public:
  GrpcServer()
      : process_({"/usr/bin/python3", FLOODGATE_SOURCE_DIR "/tests/integration/grpc/grpc_peer.py",
                  "server"}) {
    auto line = process_.read_line(std::chrono::seconds(20));
    port_ = line.empty() ? 0 : static_cast<std::uint16_t>(std::stoi(line));
    if (port_ == 0) ADD_FAILURE() << "the gRPC server did not start";
  }
  std::uint16_t port() const { return port_; }

 private:
  ChildProcess process_;
  std::uint16_t port_ = 0;
};

// One call of `kind` through floodgate on `port` (grpc_peer.py call): the status code's name,
// the details, the replies and both metadata maps, as JSON.
inline boost::json::object grpc_call(std::uint16_t port, const std::string& kind, int n = 3,
                                     const std::string& metadata = "") {
  auto out = command_output(
      "/usr/bin/python3 " FLOODGATE_SOURCE_DIR "/tests/integration/grpc/grpc_peer.py call " +
          std::to_string(port) + " " + kind + " " + std::to_string(n) + " " + metadata,
      40);
  boost::system::error_code ec;
  auto v = boost::json::parse(out, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "grpc_peer.py printed: " << out;
    return {};
  }
  return v.as_object();
}

inline std::string grpc_code(const boost::json::object& r) {
  auto* c = r.if_contains("code");
  return c && c->is_string() ? std::string(c->as_string()) : "none";
}

inline std::string grpc_trailing(const boost::json::object& r, const std::string& name) {
  auto* t = r.if_contains("trailing");
  if (!t || !t->is_object()) return "";
  auto* v = t->as_object().if_contains(name);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

}  // namespace floodgate::testing
