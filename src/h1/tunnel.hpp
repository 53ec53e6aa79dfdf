#pragma once
// WebSocket after an admitted Upgrade: the upstream's 101 goes on to the client, then bytes
// are relayed both ways, unchanged, until either side closes or both are silent for the
// idle timeout. Neither connection carries HTTP afterwards: both are closed.

#include <boost/asio/awaitable.hpp>

#include "exchange/exchange.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "http1_client.hpp"
#include "net/upstream_pool.hpp"

namespace floodgate::http {

// `response`: the upstream's 101 head; `x`: the admitted exchange (its rate headers go into
// the 101, its status becomes 101).
boost::asio::awaitable<void> run_tunnel(Http1Client client, ResponseHead& response,
                                        UpstreamConnection& upstream, Exchange& x,
                                        metrics::Metrics& metrics);

}  // namespace floodgate::http
