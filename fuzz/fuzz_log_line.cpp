// One access log line, as `floodgate replay` reads it: floodgate's JSON or nginx combined,
// then decided under a fixture config (router, key builder, memory store on the line's time).
// Checks that every view the parsers return lies inside the line or the unescape buffer, the
// one promise the replay's record storage relies on.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "replay/log_record.hpp"
#include "replay/replayer.hpp"
#include "support.hpp"

namespace {

constexpr const char* kConfig = R"yaml(
server: { listen: ["127.0.0.1:0"] }
upstreams: { o: { url: "http://127.0.0.1:9" } }
store: { key_secret: fuzz-secret-0123456789 }
jwt: { algorithms: [HS256], hs256_secret: fuzz-jwt-secret }
routes:
  - name: api
    match: { path_prefix: /api/ }
    upstream: o
    limits:
      - { name: key, algorithm: token_bucket, capacity: 5, refill_rate: 1/s, key: ["header:X-Api-Key", "query:k"], on_missing_key: shared }
      - { name: tenant, algorithm: concurrency, limit: 2, key: ["jwt:tenant"], on_missing_key: skip }
      - { name: cost, algorithm: sliding_window, limit: 100, window: 1m, key: [ip], cost: { from: "header:X-Cost", default: 1, max: 50 }, settle: "response_header:X-Used" }
  - name: site
    match: { path_prefix: / }
    upstream: o
    limits:
      - { name: ip, algorithm: sliding_log, limit: 3, window: 10s, key: [ip, host] }
)yaml";

bool inside(std::string_view v, std::string_view a, std::string_view b) {
  auto within = [&](std::string_view area) {
    return v.data() >= area.data() && v.data() + v.size() <= area.data() + area.size();
  };
  return v.empty() || within(a) || within(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace floodgate;
  static auto config = fuzz::load_fixture(kConfig, "fuzz_log_line.yaml");
  static replay::Replayer replayer(config, "fuzz", "fuzz_log_line.yaml", 3);
  static limit::Micros clock = 0;
  const std::string line(reinterpret_cast<const char*>(data), size);
  std::string scratch;
  replay::LogRecord r;
  auto result = line.empty() || line.front() != '{' ? replay::parse_nginx_combined(line, r)
                                                    : replay::parse_access_json(line, r, scratch);
  if (result.kind != replay::LineKind::request) return 0;
  const std::string_view a = line, b = scratch;
  for (auto v : {r.method, r.query, r.host, r.client, r.peer})
    if (!inside(v, a, b)) __builtin_trap();
  // An absolute-form target without a path ("GET http://h HTTP/1.1") is the literal "/".
  if (!inside(r.path, a, b) && r.path != "/") __builtin_trap();
  // (nginx lines name their two header fields with string literals: only values are checked
  // for them.)
  const bool json = !line.empty() && line.front() == '{';
  for (const auto& list : {r.fields, r.settle})
    for (const auto& [k, v] : list)
      if ((json && !inside(k, a, b)) || !inside(v, a, b)) __builtin_trap();
  // Time only moves forward in a replay; a fuzzed timestamp far in the past is decided at
  // the latest time seen, as replay.cpp does.
  if (r.at > clock) clock = r.at;
  replayer.decide(r, clock, 0);
  return 0;
}
