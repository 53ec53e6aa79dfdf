#include "lease_fleet.hpp"

#include <optional>

namespace floodgate::replay {

namespace {

// As often as a worker sweeps its book, in the log's time.
constexpr limit::Micros kSweepEvery =
    std::chrono::duration_cast<std::chrono::microseconds>(store::kLeaseSweepEvery).count();

}  // namespace

LeaseFleet::LeaseFleet(store::MemoryState& state, limit::FakeClock& clock, std::size_t instances)
    : clock_(clock) {
  for (std::size_t i = 0; i < std::max<std::size_t>(1, instances); ++i) {
    auto in = std::make_unique<Instance>();
    // The wait for units on their way never happens here (every grant has landed before the
    // next request); a second is the proxy's order of magnitude. No sweep on a real timer:
    // advance() sweeps in the log's time, so a replay does not depend on the machine's speed.
    in->store = store::make_leased_store(
        ioc_, std::make_unique<store::MemoryStore>(state, ioc_.get_executor()), in->book, clock,
        std::chrono::seconds(1), std::chrono::milliseconds(0));
    instances_.push_back(std::move(in));
  }
}

LeaseFleet::~LeaseFleet() = default;

template <class Done>
void LeaseFleet::run_until(Done done) {
  // Everything is posted to this loop and answered at once: poll until nothing is ready. Only
  // a wait for units (the proxy's timer, which a grant cancels) could need a blocking turn.
  for (;;) {
    ioc_.restart();
    if (ioc_.poll() > 0) continue;
    if (done()) return;
    ioc_.restart();
    ioc_.run_one();
  }
}

void LeaseFleet::acquire(std::size_t k, std::span<const store::Item> items, store::Outcome& out) {
  std::optional<store::AcquireResult> result;
  instances_[k % instances_.size()]->store->acquire(
      std::vector<store::Item>(items.begin(), items.end()),
      [&](store::AcquireResult r) { result = std::move(r); });
  // Top-ups land too before the next request: the store answers in no time here.
  run_until([&] { return result.has_value(); });
  if (auto* o = std::get_if<store::Outcome>(&*result)) {
    out = std::move(*o);
    return;
  }
  // The embedded store cannot fail; should it, the request counts as refused.
  out.admitted = false;
  out.decisions.assign(items.size(), limit::Decision{});
}

void LeaseFleet::adjust(std::size_t k, const store::Item& item, std::int64_t delta) {
  instances_[k % instances_.size()]->store->adjust(item, delta);
  run_until([] { return true; });
}

void LeaseFleet::advance(limit::Micros now) {
  // The sweeps due before `now`, each at its time, while any book keeps a lease (a book
  // forgets a lease idle for its ttl, so a quiet gap costs a few dozen sweeps at most).
  bool kept = true;
  while (next_sweep_ <= now && kept) {
    clock_.set(next_sweep_);
    kept = false;
    for (auto& in : instances_) {
      store::LeaseBook::GiveBacks back;
      kept |= in->book.sweep(next_sweep_, back);
      for (const auto& g : back) in->store->adjust(g.item, -g.units);
    }
    run_until([] { return true; });
    next_sweep_ += kSweepEvery;
  }
  if (next_sweep_ <= now) next_sweep_ = now + kSweepEvery;  // nothing kept: none due
  clock_.set(now);
}

std::int64_t LeaseFleet::in_hand(std::size_t k, const std::string& key, limit::Micros now) const {
  return instances_[k % instances_.size()]->book.in_hand(key, now);
}

}  // namespace floodgate::replay
