#pragma once
// The admin listener's write API (issue 20 item 2), behind a bearer token from admin.token(s):
//   GET|DELETE /keys?route=R&limit=L&key=K       a caller's state in the store / reset it
//   GET /overrides                               the per-caller overrides in force
//   PUT|DELETE /overrides/LIMIT/KEY              {"limit": N} or {"exempt": true}, "ttl"
// K is the caller as /top shows it (`ip=203.0.113.7`), percent-encoded. Every change is
// logged with the token's name and counted. Without a configured token the API is off.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <functional>
#include <optional>

#include "floodgate/config/config.hpp"
#include "floodgate/decide/worker_control.hpp"
#include "floodgate/limit/caller_overrides.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"

namespace spdlog {
class logger;
}

namespace floodgate::admin {

using metrics::Metrics;  // the counters admin renders (metrics/)

// What the API acts through, wired by app/; a part left out answers 503.
struct AdminApi {
  const decide::WorkerControl* workers = nullptr;  // /keys (and /top) ask the workers
  limit::OverrideKeeper* keeper = nullptr;
  const limit::OverrideBoard* board = nullptr;
  const limit::Clock* clock = nullptr;  // Unix time for the overrides' expiry
};

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

// The answer when `req` is for the API (its path /keys or /overrides...), else nullopt.
std::optional<Response> answer_api(const Request& req, const config::Config& config, AdminApi& api,
                                   Metrics& metrics, spdlog::logger& log);

}  // namespace floodgate::admin
