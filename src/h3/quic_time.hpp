#pragma once
// What the endpoint and its connections both hand ngtcp2: the time as it counts it (monotonic
// nanoseconds) and an Asio UDP endpoint as its address (a view, no copy).

#include <ngtcp2/ngtcp2.h>

#include <boost/asio/ip/udp.hpp>

#include <chrono>

namespace floodgate::http {

inline ngtcp2_tstamp quic_now() {
  return static_cast<ngtcp2_tstamp>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

inline ngtcp2_addr quic_addr(const boost::asio::ip::udp::endpoint& ep) {
  return {const_cast<ngtcp2_sockaddr*>(reinterpret_cast<const ngtcp2_sockaddr*>(ep.data())),
          static_cast<ngtcp2_socklen>(ep.size())};
}

}  // namespace floodgate::http
