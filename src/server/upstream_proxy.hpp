#pragma once
// The worker's Proxy: the one place that knows both upstream protocols. It runs the driver
// (driver.hpp) with the call the chosen server speaks: HTTP/1.1 or h2.

#include "exchange/proxy.hpp"
#include "floodgate/decide/gate.hpp"
#include "h2/upstream_h2.hpp"
#include "net/upstreams.hpp"

namespace floodgate::http {

class UpstreamProxy final : public Proxy {
 public:
  UpstreamProxy(Upstreams& upstreams, H2UpstreamPool& h2, decide::Gate& gate)
      : upstreams_(upstreams), h2_(h2), gate_(gate) {}

  boost::asio::awaitable<Forwarded> forward(Front& front, Exchange& x,
                                            const config::Upstream& up) override;

 private:
  Upstreams& upstreams_;
  H2UpstreamPool& h2_;
  decide::Gate& gate_;
};

}  // namespace floodgate::http
