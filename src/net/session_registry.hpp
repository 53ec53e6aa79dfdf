#pragma once
// The sessions one worker has open, so that a drain can reach them: it ends the idle ones at
// once, the rest at its deadline, and waits until none is left before the worker's context
// goes (a session's coroutine uses that context up to its last line, its destructor included).
// One event loop thread only, like the rest of a worker's Services.

#include <boost/intrusive/list.hpp>

#include <cstddef>

namespace floodgate::http {

class SessionRegistry {
 public:
  // A session is one of these for as long as it lives: linked on construction, unlinked on
  // destruction, so the registry's size is exactly the sessions whose frames still exist.
  class Entry : public boost::intrusive::list_base_hook<> {
   public:
    // Ends a keep-alive connection's wait for its next request; the session then closes the
    // connection the polite way (TLS close_notify, FIN).
    virtual void end_idle_wait() = 0;
    // Closes the client connection and times out whatever the session waits on (an upstream
    // read, a tunnel); a store decision in progress ends at the store's own deadline.
    virtual void abort() = 0;

    enum class State {
      busy,     // handshaking, reading a request or serving one
      idle,     // waiting for a keep-alive connection's next request: nothing is lost by closing
      closing,  // done, closing by itself (TLS close_notify, FIN): within a second
    };
    State state = State::busy;  // kept by the session

   protected:
    explicit Entry(SessionRegistry& r) : registry_(r) { r.live_.push_back(*this); }
    ~Entry() { registry_.live_.erase(registry_.live_.iterator_to(*this)); }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    SessionRegistry& registry_;
  };

  SessionRegistry() = default;
  SessionRegistry(const SessionRegistry&) = delete;
  SessionRegistry& operator=(const SessionRegistry&) = delete;

  std::size_t size() const { return live_.size(); }

  // Both only cancel or close sockets: Asio never runs a completion inline there, so no entry
  // unlinks itself while these walk the list.
  void end_idle_waits() {
    for (auto& e : live_)
      if (e.state == Entry::State::idle) e.end_idle_wait();
  }
  // Those handshaking, reading or serving a request; an idle or closing one is ending politely
  // (end_idle_waits) and keeps its chance until the drain's deadline.
  void abort_busy() {
    for (auto& e : live_)
      if (e.state == Entry::State::busy) e.abort();
  }
  void abort_all() {
    for (auto& e : live_) e.abort();
  }

 private:
  boost::intrusive::list<Entry, boost::intrusive::constant_time_size<true>> live_;
};

}  // namespace floodgate::http
