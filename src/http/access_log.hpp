#pragma once
// One JSON line per request: what an operator needs to explain a decision, and, when
// log.replay_fields asks for it, the inputs `floodgate replay` needs to decide the same
// request under another config. No raw client identifier beyond the socket peer unless the
// operator listed it (and then possibly hashed).

#include <boost/beast/http/message.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/keys/key_builder.hpp"
#include "floodgate/limit/algorithm.hpp"

namespace floodgate::http {

struct AccessEntry {
  const config::Config& config;  // the snapshot the request was served under
  const boost::beast::http::request_header<>& request;
  std::string_view peer_ip;
  const config::IpAddress& peer;
  std::string_view route;
  int status = 0;
  std::string_view decision;  // empty: no limit was consulted
  std::string_view limit;
  std::string_view key;
  limit::Micros arrived = 0;  // the limit clock when the request's header had been read
  std::chrono::steady_clock::duration took{};
  std::chrono::steady_clock::duration upstream_took{};
  // Settle headers of the response (lower-case name, value), for replaying settlement.
  const std::vector<std::pair<std::string, std::string>>& settled;
};

// The line, without a newline. `hasher` hashes the replay fields marked hashed.
std::string access_line(const AccessEntry& e, keys::KeyHasher& hasher);

// JSON string contents: quotes and backslashes escaped, control characters as \u00XX.
void append_json_escaped(std::string& out, std::string_view s);

}  // namespace floodgate::http
