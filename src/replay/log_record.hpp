#pragma once
// One request read from an access log, as the replay needs it. Views point into storage
// owned by whoever parsed the line (see LogReader), valid until its next record.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "floodgate/limit/algorithm.hpp"

namespace floodgate::replay {

struct LogRecord {
  limit::Micros at = 0;  // Unix time of the request (microseconds)
  std::string_view method;
  std::string_view path;
  std::string_view query;   // without '?'; empty when not logged
  std::string_view host;    // without port; empty when not logged
  std::string_view client;  // the resolved client address, or "#hash"; empty: use peer
  std::string_view peer;
  std::int64_t duration_us = 0;  // how long the request held a concurrency lease
  int status = 0;
  bool live_refused = false;  // floodgate's own verdict at the time ("decision":"limited")
  bool has_fields = false;    // the line carried replay fields ("fields")
  std::size_t source = 0;     // which of the logs it came from (their order on the command line)
  // "header:x-api-key" -> value, "query:k" -> value, "jwt:tenant" -> value (as logged).
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  // Response settle headers: lower-case name -> value.
  std::vector<std::pair<std::string_view, std::string_view>> settle;

  // Ready for the next line, keeping the vectors' capacity.
  void clear() {
    at = 0;
    method = path = query = host = client = peer = {};
    duration_us = 0;
    status = 0;
    live_refused = has_fields = false;
    fields.clear();
    settle.clear();
  }
};

// What a line turned out to be.
enum class LineKind { request, skipped, bad };

struct ParseResult {
  LineKind kind = LineKind::bad;
  std::string_view why;  // for bad lines: a short reason, for the report
};

// floodgate's JSON access log line. `scratch` holds unescaped strings (reserved by the
// caller so that views into it stay valid: see the implementation).
ParseResult parse_access_json(std::string_view line, LogRecord& out, std::string& scratch);

// nginx's `combined` format: $remote_addr - $remote_user [$time_local] "$request" $status
// $body_bytes_sent "$http_referer" "$http_user_agent". Time has whole seconds only; the
// caller spreads a second's requests across it. Referer and User-Agent become
// header:referer and header:user-agent.
ParseResult parse_nginx_combined(std::string_view line, LogRecord& out);

}  // namespace floodgate::replay
