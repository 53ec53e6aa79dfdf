#pragma once
// Between routing and forwarding: applies a route's limits to one request. Either answers the
// request itself (401 / 400 / 429 / 503) or admits it, with the headers the response will
// carry and what must happen after the response (settlement, lease release).

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/fields.hpp>

#include <optional>
#include <string>
#include <vector>

#include "error_response.hpp"
#include "floodgate/limit/policy.hpp"
#include "worker_context.hpp"

namespace floodgate::http {

struct Admission {
  store::LimitStore* store = nullptr;  // the store that charged (the local one when degraded)
  // For the access log: what was decided, by which limit, for which (hashed) key.
  std::string_view decision = "none";
  std::string limit;
  std::string key;
  limit::HeaderList headers;        // for the response: the limit closest to refusal
  std::vector<store::Item> leases;  // concurrency leases to return when the response ends
  struct Settle {
    store::Item item;
    std::string header;  // response header carrying the true cost
    std::int64_t charged = 0;
  };
  std::vector<Settle> settles;
};

struct GateResult {
  std::optional<Answer> answer;  // set: send this instead of forwarding
  Admission admission;
};

struct GateInput {
  const boost::beast::http::fields& fields;
  std::string_view method;
  std::string_view host;  // without port
  std::string_view path;
  std::string_view query;
  const config::IpAddress& peer;
  unsigned version = 11;
  bool keep_alive = true;  // may the connection carry another request after an answer
};

// The worker's key hasher under the snapshot's key_secret (rebuilt when the secret changes).
keys::KeyHasher& hasher_for(WorkerContext& w, const config::Config& c);

boost::asio::awaitable<GateResult> apply_limits(WorkerContext& w, const config::Config& config,
                                                const config::Route& route, const GateInput& in);

// Applies the admission to an upstream response: settles true costs from its headers (and
// forgets cached refusals a refund made untrue).
void settle_from_response(const Admission& a, const boost::beast::http::fields& response,
                          limit::DenyCache& deny);

}  // namespace floodgate::http
