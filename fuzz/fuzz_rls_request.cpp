// A gRPC request body sent to Envoy's rate limit service (rls.listen), through the steps
// rls::RlsService takes after the HTTP/2 framing: the length-prefixed message taken from the
// body (rls/grpc_unary.hpp), then rls::should_rate_limit: protobuf's lite parser, the call's
// checks, each descriptor matched against its domain's rules (exact values, prefix patterns,
// any value, nested entries), its own limit, hits_addend, the plan decided by the real
// decide::Gate on an in-process store, and the response serialized. The first byte chooses
// whether the rest is a body (framed) or the message itself, so that both the framing and the
// decoder get inputs of their own. A decoded response must parse again.

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/memory_store.hpp"
#include "rls/grpc_unary.hpp"
#include "rls/rls.pb.h"
#include "rls/rls_call.hpp"
#include "support.hpp"

namespace {

using namespace floodgate;

const char* kConfig = R"(server: { threads: 1 }
store: { key_secret: fuzz-secret-0123456789abcdef }
rls:
  listen: ["127.0.0.1:0"]
  domains:
    - domain: edge
      descriptors:
        - match: [ { key: remote_address } ]
          limits:
            - { name: per-ip, algorithm: fixed_window, limit: 5, window: 1m }
            - { name: per-ip-log, algorithm: sliding_log, limit: 3, window: 10s }
        - match: [ { key: tenant, value: acme }, { key: path } ]
          limits:
            - { name: acme-path, algorithm: token_bucket, capacity: 4, refill_rate: 1/s }
        - match: [ { key: plan, value: "gold*" } ]
          limits:
            - { name: gold, algorithm: gcra, capacity: 2, refill_rate: 1/m, mode: shadow }
        - match: [ { key: plan, value: "g*" }, { key: user } ]
          limits:
            - { name: g-user, algorithm: sliding_window, limit: 2, window: 1h, rollout: 50% }
        - match: [ { key: a }, { key: b }, { key: c } ]
          limits:
            - { name: deep, algorithm: quota, limit: 10, period: day, timezone: UTC }
    - domain: other
      descriptors:
        - match: [ { key: k, value: "" } ]
          limits:
            - { name: empty-value, algorithm: fixed_window, limit: 1, window: 1s }
)";

struct Fixture {
  config::ConfigPtr config = fuzz::load_fixture(kConfig, "fuzz-rls.yaml");
  boost::asio::io_context ioc;
  metrics::Metrics metrics{"fuzz", "fuzz"};
  std::shared_ptr<spdlog::logger> log =
      std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  limit::FakeClock clock{fuzz::kNowSeconds * limit::kMicrosPerSecond};
  store::MemoryState state{clock, 1000};
  store::MemoryStore store{state, ioc.get_executor()};
  store::MemoryStore local{state, ioc.get_executor()};
  decide::Gate gate{store, local, metrics, *log, "fuzz:"};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture* f = new Fixture();  // one store across inputs: later calls can be refused
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view message = input;
  if (data[0] & 1) {
    const auto u = rls::unframe(input, 1 << 16, message);
    if (u != rls::Unframed::ok) {
      if (rls::code_of(u) == rls::GrpcCode::ok) std::abort();  // a refusal must be an error
      return 0;
    }
  }
  rls::Answer answer;
  rls::CallRecord record;
  static rls::CallScratch scratch;  // reused across inputs, as a worker reuses its own
  boost::asio::co_spawn(
      f->ioc,
      [&]() -> boost::asio::awaitable<void> {
        answer = co_await rls::should_rate_limit(f->gate, f->config, message, f->clock.now(),
                                                 scratch, record);
      },
      boost::asio::detached);
  f->ioc.restart();
  f->ioc.run();
  if (answer.code == rls::GrpcCode::ok) {
    rls::wire::RateLimitResponse response;
    if (!response.ParseFromString(answer.body)) std::abort();
    if (response.overall_code() == rls::wire::RateLimitResponse::UNKNOWN) std::abort();
  } else if (answer.message.empty()) {
    std::abort();  // every error says why
  }
  f->clock.advance(1000);  // 1 ms between calls: windows and buckets move
  return 0;
}
