#pragma once
// `floodgate replay --lease`: the config's leased limits decided as N instances sharing one
// store would decide them. Each instance has its own LeaseBook and LeasedStore, the code the
// proxy runs, over one embedded store that keeps Redis's record of who holds what; everything
// reads the replay's virtual clock. A grant lands at once: the round trip to a far store is
// not simulated (it would delay units, never add any), nor is a store failure.

#include <boost/asio/io_context.hpp>

#include <memory>
#include <span>
#include <vector>

#include "floodgate/store/leased_store.hpp"
#include "floodgate/store/memory_store.hpp"

namespace floodgate::replay {

class LeaseFleet {
 public:
  // `clock`: the replay's virtual clock, which advance() moves through the sweeps it owes.
  LeaseFleet(store::MemoryState& state, limit::FakeClock& clock, std::size_t instances);
  ~LeaseFleet();

  std::size_t size() const { return instances_.size(); }
  // Decides `items` as instance `k` would, into `out` (a leased item from its units in hand,
  // or with a grant from the store; the rest by the store).
  void acquire(std::size_t k, std::span<const store::Item> items, store::Outcome& out);
  // A settlement through instance `k` (on a leased key the store sees what leases hold).
  void adjust(std::size_t k, const store::Item& item, std::int64_t delta);
  // Units past their ttl go back to the store, as a worker's sweep does every 50 ms: call
  // before each decision with its time. Across a quiet gap the sweeps it owes run at their
  // own times (until the books are empty), so units come back when the proxy's would.
  void advance(limit::Micros now);
  // Units instance `k` has in hand for `key` (a refusing instance's own, short of the cost).
  std::int64_t in_hand(std::size_t k, const std::string& key, limit::Micros now) const;

 private:
  struct Instance {
    store::LeaseBook book;
    std::unique_ptr<store::LimitStore> store;
  };
  // Runs what is ready until `done` (a decision's answer, and any top-up it started).
  template <class Done>
  void run_until(Done done);

  void sweep(limit::Micros at);

  limit::FakeClock& clock_;
  boost::asio::io_context ioc_;
  std::vector<std::unique_ptr<Instance>> instances_;
  limit::Micros next_sweep_ = 0;
};

}  // namespace floodgate::replay
