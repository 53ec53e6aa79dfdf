#include "upstream_proxy.hpp"

#include "exchange/driver.hpp"
#include "h1/h1_upstream_call.hpp"
#include "h2/h2_upstream_call.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // see h2_stream.cpp
#endif

namespace floodgate::http {

asio::awaitable<Forwarded> UpstreamProxy::forward(Front& front, Exchange& x,
                                                  const config::Upstream& up) {
  Driver driver(upstreams_, gate_, front, x, up);
  if (driver.h2())
    co_return co_await driver.run_with([&] {
      return H2UpstreamCall(h2_, x, front.wakers(), driver.abandon(), front.response_head());
    });
  co_return co_await driver.run_with([&] {
    return H1UpstreamCall(upstreams_.pool, front.watchdog(), front.head_buffer(),
                          front.response_head());
  });
}

}  // namespace floodgate::http
