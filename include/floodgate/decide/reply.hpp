#pragma once
// An answer floodgate gives itself instead of the upstream's, before any protocol renders it:
// a status with its one fixed line, or a limit's refusal (429 with the rate-limit headers
// and a JSON body). HTTP/1.1 serializes it into an Answer (error_response.hpp); another front
// protocol renders the same status, headers and body in its own framing.

#include <optional>
#include <string>
#include <string_view>

#include "floodgate/config/config.hpp"
#include "floodgate/limit/policy.hpp"

namespace floodgate::decide {

struct Reply {
  int status = 0;
  std::string_view retry_after;  // when not empty, a Retry-After header (503s)
  // A 429: the refusing limit's numbers, for the headers and the body.
  struct Refusal {
    const config::Limit* limit = nullptr;
    limit::Params params;
    limit::Decision decision;
    limit::Micros now = 0;  // Unix time of the decision (the store's clock when it gave one)
    // The route's own refusal answer (config::RefusalPage), or null for the built-in JSON.
    const config::RefusalPage* page = nullptr;
    std::string_view route;  // for the page's {route}
  };
  std::optional<Refusal> refusal;
  // The exchange's X-Request-Id: a header of the answer, and in its body (the line's end, or
  // the refusal's JSON), so that a user's report names the request in the logs.
  std::string_view request_id;
  // The listener's Alt-Svc (a TCP listener that also serves HTTP/3): a header of the answer.
  std::string_view alt_svc;
};

// A refusal by `limit` of a request on `route`: 429 with the built-in JSON, or the route's own
// refusal page (its status, content type and body).
Reply refused(const config::Route& route, const config::Limit& limit, const limit::Params& params,
              const limit::Decision& d, limit::Micros now);

// Every header of the reply beyond the framing ones (status, Server, Content-Type,
// Content-Length, Connection), in order.
void reply_headers(const Reply& r, const limit::HeaderSink& emit);
std::string_view reply_content_type(const Reply& r);
// The body: the status's fixed line, the refusal's JSON or its route's page. `storage` owns a
// built one.
std::string_view reply_body(const Reply& r, std::string& storage);

}  // namespace floodgate::decide
