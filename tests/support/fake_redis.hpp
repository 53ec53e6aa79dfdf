#pragma once
// A small fake Redis for the faults a real one cannot be made to commit: malformed or huge
// replies, MOVED/ASK to nodes that do not parse, redirect loops, a server that answers AUTH and
// then nothing. It speaks RESP over real loopback sockets on its own thread; each test scripts
// what it answers, command by command, and may change the script while it runs ("behave
// again"). Once a connection stalls, nothing more is written on it, as with a hung server.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate::testing {

class FakeRedis {
 public:
  struct Answer {
    std::string bytes;   // written as they are (RESP)
    bool stall = false;  // this command and every later one on the connection: no answer
    std::chrono::milliseconds delay{0};  // answered this much later (the fake's thread sleeps)
  };
  // Called on the fake's thread with the command's arguments (the name upper-cased).
  using Script = std::function<Answer(const std::vector<std::string>& command)>;

  FakeRedis();  // behave()
  explicit FakeRedis(Script script);
  ~FakeRedis();
  FakeRedis(const FakeRedis&) = delete;
  FakeRedis& operator=(const FakeRedis&) = delete;

  std::uint16_t port() const { return port_; }
  void script(Script s);
  std::uint64_t count(const std::string& command) const;  // received so far, by name
  std::uint64_t connections() const;                      // accepted so far

  static Answer reply(std::string bytes) { return {std::move(bytes), false, {}}; }
  static Answer later(std::string bytes, std::chrono::milliseconds delay) {
    return {std::move(bytes), false, delay};
  }
  static Answer stall() { return {{}, true, {}}; }
  // A well-behaved server for floodgate's commands: PING, AUTH, every acquire admitted (with
  // 5 of 10 remaining), adjust and ZREM acknowledged, and CLUSTER SLOTS naming
  // 127.0.0.1:`slots_owner` for every slot (0: not a cluster node).
  static Script behave(std::uint16_t slots_owner = 0);
  // The acquire script's reply to these requests (per item: has it a holder): all admitted, a
  // leased item granted `granted` units.
  static std::string admitted(const std::vector<std::vector<bool>>& requests,
                              std::int64_t granted = 1);
  // The requests of an acquire call (per item: has it a holder); empty if it is not one.
  static std::vector<std::vector<bool>> acquire_requests(const std::vector<std::string>& command);
  static std::string all_slots_to(std::uint16_t port);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::uint16_t port_ = 0;
};

}  // namespace floodgate::testing
