#pragma once
// One ShouldRateLimit call decided: the request's descriptors matched against its domain's
// rules, planned as one set of store items (each tagged with its descriptor), decided at once
// by decide::Gate (all or nothing, the store's clock), and answered with a status per
// descriptor. No HTTP and no gRPC framing here (rls_service.hpp frames).

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>
#include <string_view>

#include "floodgate/config/config.hpp"
#include "floodgate/decide/admission.hpp"
#include "floodgate/decide/descriptor_plan.hpp"
#include "floodgate/decide/gate.hpp"
#include "grpc_unary.hpp"

namespace floodgate::rls {

struct Answer {
  GrpcCode code = GrpcCode::ok;
  std::string message;  // why, when not ok (grpc-message)
  std::string body;     // ok: the serialized RateLimitResponse
};

// What the access log says of a call.
struct CallRecord {
  const config::Route* route = nullptr;  // the domain's (null: unknown, or not decided)
  std::string domain;
  bool read = false;  // the request was a valid call: CallScratch::call holds it
  bool over_limit = false;
  decide::Admission admission;
};

namespace wire {
class RateLimitRequest;
class RateLimitResponse;
}  // namespace wire

// What a worker reuses from call to call: the messages, the call's views, its plan.
struct CallScratch {
  CallScratch();
  ~CallScratch();
  std::unique_ptr<wire::RateLimitRequest> request;
  std::unique_ptr<wire::RateLimitResponse> response;
  decide::DescriptorCall call;
  decide::DescriptorPlan planned;
  store::Outcome outcome;
};

// Decides the serialized RateLimitRequest `message` under `snapshot` at `now`.
boost::asio::awaitable<Answer> should_rate_limit(decide::Gate& gate,
                                                 const config::ConfigPtr& snapshot,
                                                 std::string_view message, limit::Micros now,
                                                 CallScratch& scratch, CallRecord& record);

}  // namespace floodgate::rls
