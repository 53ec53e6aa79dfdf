#pragma once
// A listener's own answer to each request, in place of the proxy: Envoy's rate limit service
// on rls.listen. The front hands it the request (its head, its body through the front) and
// takes its response; the exchange is the call's record for the access log (its route, the
// gate's admission, the status), nothing more: no route is matched, nothing is forwarded.

#include <boost/asio/awaitable.hpp>

#include "exchange.hpp"
#include "proxy.hpp"

namespace floodgate::http {

class StreamService {
 public:
  virtual ~StreamService() = default;
  virtual boost::asio::awaitable<void> serve(Front& front, Exchange& x) = 0;
};

}  // namespace floodgate::http
