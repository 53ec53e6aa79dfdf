#pragma once
// Envoy's rate limit service on rls.listen: every HTTP/2 stream one unary gRPC call of
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, decided by rls_call.hpp and
// answered with the response message and grpc-status in trailers; a gRPC error (malformed
// call: INVALID_ARGUMENT; unknown method: UNIMPLEMENTED; the store failing closed:
// UNAVAILABLE; past grpc-timeout: DEADLINE_EXCEEDED) in a trailers-only answer. The
// connection stays up whatever one call sends. One per worker, on its loop.

#include <memory>
#include <vector>

#include "exchange/stream_service.hpp"
#include "floodgate/decide/gate.hpp"
#include "rls_call.hpp"

namespace floodgate::rls {

class RlsService final : public http::StreamService {
 public:
  explicit RlsService(decide::Gate& gate) : gate_(gate) {}
  boost::asio::awaitable<void> serve(http::Front& front, http::Exchange& x) override;

  // The method's path, and the most a request's message may be (Envoy's are a few hundred
  // bytes; gRPC's default receive limit is 4 MiB).
  static constexpr std::string_view kPath =
      "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
  static constexpr std::size_t kMaxMessage = 1 << 20;

 private:
  decide::Gate& gate_;
  // Scratch of calls not in flight: a call takes one (or makes one) and gives it back, so
  // that calls waiting on the store at once each have their own. A burst's extra ones are
  // freed rather than kept.
  static constexpr std::size_t kSpares = 64;
  std::vector<std::unique_ptr<CallScratch>> spare_;
};

}  // namespace floodgate::rls
