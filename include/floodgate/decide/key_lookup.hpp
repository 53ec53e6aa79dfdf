#pragma once
// The admin API's /keys on a worker's loop: the caller's store key from its text (as /top
// shows it), then a decision of cost 0 (its state: remaining, reset) or a reset.

#include <boost/asio/awaitable.hpp>

#include "floodgate/decide/gate.hpp"
#include "floodgate/decide/worker_control.hpp"

namespace floodgate::decide {

// `store` is the gate's; `c` the snapshot in force, `now` the limit clock's time.
boost::asio::awaitable<KeyAnswer> answer_key_request(Gate& gate, store::LimitStore& store,
                                                     const config::ConfigPtr& c, limit::Micros now,
                                                     const KeyRequest& request);

}  // namespace floodgate::decide
