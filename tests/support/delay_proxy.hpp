#pragma once
// A TCP relay that puts distance between floodgate and a store: every chunk of bytes is held
// for `one_way` in each direction, so a request/response round trip costs 2 * one_way more.
// The machine's loopback is left alone (no tc/netem, no root), so tests using it can run in
// parallel with tests that need a near store. It can also cut every connection at once and
// refuse new ones, as a store that went away would. It runs on its own thread.

#include <chrono>
#include <cstdint>
#include <memory>

namespace floodgate::testing {

class DelayProxy {
 public:
  // Forwards to 127.0.0.1:`target_port`. A chunk read at t is written at t + one_way even when
  // earlier chunks are still waiting (each direction is a queue of due times), and order within
  // a connection is kept: latency is added, bandwidth is not taken away.
  DelayProxy(std::uint16_t target_port, std::chrono::microseconds one_way);
  ~DelayProxy();  // stops the thread, closes every socket
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  std::uint16_t port() const { return port_; }        // where clients connect (127.0.0.1)
  void set_delay(std::chrono::microseconds one_way);  // applies to chunks read from now on
  // Closes every open connection at once (both sides) and, while `refuse` is true, closes new
  // ones as soon as they are accepted. Done when it returns; call it from the test's thread.
  void cut(bool refuse);
  std::uint64_t connections() const;  // accepted so far (refused ones included)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace floodgate::testing
