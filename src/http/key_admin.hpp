#pragma once
// The admin API's /keys on a worker's loop: the caller's store key from its text (as /top
// shows it), then a decision of cost 0 (its state: remaining, reset) or a reset.

#include <boost/asio/awaitable.hpp>

#include "floodgate/http/server.hpp"
#include "worker_context.hpp"

namespace floodgate::http {

boost::asio::awaitable<KeyAnswer> answer_key_request(WorkerContext& ctx, const KeyRequest& request);

}  // namespace floodgate::http
