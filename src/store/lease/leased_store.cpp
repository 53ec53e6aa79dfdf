// A worker's store for leased limits (store/leased_store.hpp): leased items are decided from
// the instance's LeaseBook, everything else (and every grant) by the worker's own store.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <optional>

#include "floodgate/store/leased_store.hpp"

namespace floodgate::store {

namespace asio = boost::asio;

namespace {

// Asks the store for `need` units for a request (0: none, a background top-up asks for at
// least one) and up to `spare` more for the hand, reporting `settled` spent units.
Item grant_request(const Item& item, const std::string& holder, std::int64_t need,
                   std::int64_t spare, std::int64_t settled) {
  Item ask;
  ask.key = item.key;
  ask.params = item.params;
  ask.cost = need > 0 ? need : 1;
  ask.take_up_to = spare > 0 ? need + spare : 0;
  ask.enforce = true;
  ask.leased = item.leased;
  ask.leased.holder = holder;
  ask.leased.settled = settled;
  return ask;
}

// Whether a store's answer to `ask` is one a store may give: an admission grants at least the
// request's units and never more than asked for. A store that answers more (a hostile or broken
// one) would otherwise fill the hand past the lease's size and admit past the limit: its answer
// is a store error, and the route's on_store_error decides.
bool grant_within(const limit::Decision& d, const Item& ask) {
  if (!d.admitted) return true;
  return d.granted >= 0 && d.granted <= std::max(ask.cost, ask.take_up_to);
}

// A decision for an item that was never asked because another limit refused first: not
// charged, so nothing to say but its quota.
limit::Decision undecided(const Item& item) {
  limit::Decision d;
  d.admitted = true;
  d.limit = item.params.capacity;
  d.remaining = item.params.capacity;
  return d;
}

class LeasedStore final : public LimitStore {
 public:
  LeasedStore(asio::io_context& ioc, std::unique_ptr<LimitStore> inner, LeaseBook& book,
              const limit::Clock& clock, std::chrono::milliseconds max_wait,
              std::chrono::milliseconds sweep_every)
      : ioc_(ioc),
        inner_(std::move(inner)),
        book_(book),
        clock_(clock),
        max_wait_(max_wait),
        sweep_every_(sweep_every),
        sweep_timer_(ioc),
        alive_(std::make_shared<LeasedStore*>(this)) {}

  void async_acquire(std::vector<Item> items, Handler handler) override {
    const bool leased =
        std::any_of(items.begin(), items.end(), [](const Item& i) { return i.leased.size > 0; });
    if (!leased) return inner_->async_acquire(std::move(items), std::move(handler));
    // The usual case, a hot key with units in hand: decided here, without a coroutine.
    std::optional<LeaseBook::Take> first;
    if (items.size() == 1) {
      first = take(items.front(), clock_.now(), true);
      if (first->local) {
        Outcome out;
        out.admitted = true;
        out.decisions.push_back(first->decision);
        // The worker's own loop: the caller resumes on its thread, never inside this call.
        return asio::post(ioc_,
                          [h = std::move(handler), r = AcquireResult(std::move(out))]() mutable {
                            std::move(h)(std::move(r));
                          });
      }
    }
    asio::co_spawn(ioc_, decide(std::move(items), std::move(first)),
                   [h = std::move(handler)](std::exception_ptr e, AcquireResult r) mutable {
                     // Nothing in decide() throws by design; if it did, the decision fails.
                     if (e) r = StoreError::protocol;
                     std::move(h)(std::move(r));
                   });
  }

  void adjust(const Item& item, std::int64_t delta) override {
    if (item.leased.size == 0 || !item.leased.holder.empty()) return inner_->adjust(item, delta);
    // A settlement on a leased key: the store must see what leases hold (lua/prelude.lua).
    Item leased = item;
    leased.leased.holder = book_.holder();
    leased.leased.settled = 0;
    leased.leased.returning = false;
    inner_->adjust(leased, delta);
  }
  void release(const Item& item) override { inner_->release(item); }
  void reset(const Item& item) override { inner_->reset(item); }
  bool healthy() const override { return inner_->healthy(); }

  void reconfigured(const std::string& leased) override {
    LeaseBook::GiveBacks back;
    book_.reconfigure(leased, clock_.now(), back);
    give_back(back);
  }

  void close(std::function<void()> done) override {
    LeaseBook::GiveBacks back;
    book_.close(clock_.now(), back);
    std::vector<Item> probes;
    for (const auto& g : back) {
      Item probe = g.item;  // with the holder: it sees what leases hold
      probe.cost = 0;
      probe.take_up_to = 0;
      probe.leased.settled = 0;
      probe.leased.returning = false;
      probes.push_back(std::move(probe));
    }
    give_back(back);
    probe(std::move(probes), 2, std::move(done));
  }

 private:
  // `first`: what async_acquire already took for item 0 (not local), if it did.
  asio::awaitable<AcquireResult> decide(std::vector<Item> items,
                                        std::optional<LeaseBook::Take> first) {
    Outcome out;
    out.admitted = true;
    out.decisions.resize(items.size());
    LeaseBook::GiveBacks back;
    std::vector<std::size_t> held;  // leased items admitted so far: their units, if refused
    std::vector<std::size_t> exact;
    bool refused = false;
    auto undo = [&] {
      const auto now = clock_.now();
      for (auto i : held) book_.put_back(items[i], items[i].cost, now, back);
      give_back(back);
    };
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& item = items[i];
      if (item.leased.size == 0) {
        exact.push_back(i);
        continue;
      }
      if (refused) {
        out.decisions[i] = undecided(item);
        continue;
      }
      auto now = clock_.now();
      auto t = i == 0 && first ? *first : take(item, now, true);
      if (t.wait) {
        // Units are on their way (another request's grant, a top-up): wait for them, at most
        // as long as a store decision may take, then take again.
        co_await wait_for_grant(item);
        now = clock_.now();
        t = take(item, now, false);
      }
      if (t.local) {
        out.decisions[i] = t.decision;
        held.push_back(i);
        continue;
      }
      // Not enough in hand: one round trip, which also fills the hand.
      const std::int64_t need = item.cost - t.reserved;
      // (Built outside the co_await: GCC 12 miscompiles an initializer list inside one.)
      std::vector<Item> ask;
      ask.push_back(grant_request(item, book_.holder(), need, t.spare, t.settled));
      const Item asked = ask.front();
      auto answer = co_await inner_->acquire(std::move(ask), asio::use_awaitable);
      const auto* o = std::get_if<Outcome>(&answer);
      const bool decided = o && o->decisions.size() == 1 && grant_within(o->decisions[0], asked);
      limit::Decision d;
      wake(book_.granted(item, need, t.spare, t.settled, decided ? &o->decisions[0] : nullptr, now,
                         decided ? o->now : 0, clock_.now(), d, back));
      if (!decided) {  // the store failed: the route's on_store_error decides the request
        book_.put_back(item, t.reserved, clock_.now(), back);
        undo();
        co_return o ? AcquireResult(StoreError::protocol) : answer;
      }
      out.now = o->now;
      out.decisions[i] = d;
      if (d.admitted) {
        held.push_back(i);
      } else {
        book_.put_back(item, t.reserved, clock_.now(), back);
        if (item.enforce) refused = true;
      }
    }
    if (!refused && !exact.empty()) {
      std::vector<Item> rest;
      for (auto i : exact) rest.push_back(items[i]);
      auto answer = co_await inner_->acquire(std::move(rest), asio::use_awaitable);
      const auto* o = std::get_if<Outcome>(&answer);
      if (!o || o->decisions.size() != exact.size()) {
        undo();
        co_return o ? AcquireResult(StoreError::protocol) : answer;
      }
      for (std::size_t k = 0; k < exact.size(); ++k) out.decisions[exact[k]] = o->decisions[k];
      out.now = o->now;
      refused = !o->admitted;
    } else {
      for (auto i : exact) out.decisions[i] = undecided(items[i]);
    }
    if (refused) {
      out.admitted = false;
      undo();  // all or nothing: the leased units go back into the hand
    } else {
      give_back(back);
    }
    co_return out;
  }

  // Takes `item`'s cost from the book. What that gives back goes to the store at once, before
  // any grant for the key (on one connection, in this order); a hand running low asks for more
  // in the background.
  LeaseBook::Take take(const Item& item, limit::Micros now, bool may_wait) {
    LeaseBook::GiveBacks back;
    auto t = book_.take(item, now, back, may_wait);
    give_back(back);
    keep_sweeping();
    if (t.local && t.top_up > 0) top_up(item, t.top_up, t.settled);
    return t;
  }

  // Asks for more in the background: nothing waits for it. The book outlives every worker;
  // this store may not, so the answer checks it is still there before returning anything.
  void top_up(const Item& item, std::int64_t units, std::int64_t settled) {
    const auto sent = clock_.now();
    std::weak_ptr<LeasedStore*> alive = alive_;
    Item key = item;
    Item asked = grant_request(item, book_.holder(), 0, units, settled);
    inner_->async_acquire(
        {asked},
        [alive, &book = book_, &clock = clock_, key, asked, units, settled, sent](AcquireResult r) {
          const auto* o = std::get_if<Outcome>(&r);
          const bool decided =
              o && o->decisions.size() == 1 && grant_within(o->decisions[0], asked);
          LeaseBook::GiveBacks back;
          limit::Decision ignored;
          wake(book.granted(key, 0, units, settled, decided ? &o->decisions[0] : nullptr, sent,
                            decided ? o->now : 0, clock.now(), ignored, back));
          if (auto self = alive.lock()) (*self)->give_back(back);
        });
  }

  // Each return is followed on its key's connection by a decision that charges nothing: when
  // every one has answered, the returns before them have reached the store. Twice: a return
  // Redis could not run yet ("Function not found", NOSCRIPT) is sent again when that answer
  // comes back, after the first probe.
  void probe(std::vector<Item> probes, int rounds, std::function<void()> done) {
    if (probes.empty() || rounds == 0) return done();
    auto left = std::make_shared<std::size_t>(probes.size());
    auto state = std::make_shared<std::pair<std::vector<Item>, std::function<void()>>>(
        probes, std::move(done));
    std::weak_ptr<LeasedStore*> alive = alive_;
    for (auto& p : probes)
      inner_->async_acquire({std::move(p)}, [left, state, rounds, alive](AcquireResult) {
        if (--*left != 0) return;
        if (auto self = alive.lock())
          (*self)->probe(std::move(state->first), rounds - 1, std::move(state->second));
      });
  }

  asio::awaitable<void> wait_for_grant(const Item& item) {
    auto timer = std::make_shared<asio::steady_timer>(ioc_, max_wait_);
    std::weak_ptr<asio::steady_timer> weak = timer;
    // The grant may land on another worker: the wake is posted to this one's loop, which runs
    // it only once this coroutine waits (one thread per loop), so no wake is missed.
    auto woken = book_.await(item, [weak, ex = ioc_.get_executor()] {
      asio::post(ex, [weak] {
        if (auto t = weak.lock()) t->cancel();
      });
    });
    if (!woken) co_return;
    co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  }

  static void wake(const std::vector<LeaseBook::Wake>& waiting) {
    for (const auto& w : waiting) w();
  }

  void give_back(LeaseBook::GiveBacks& back) {
    for (const auto& g : back) inner_->adjust(g.item, -g.units);
    back.clear();
  }

  // While the book keeps leases, this worker sweeps it every sweep_every_ (every worker that
  // took from it does; each lease is returned once, under its shard's lock).
  void keep_sweeping() {
    if (sweeping_ || sweep_every_.count() == 0) return;
    sweeping_ = true;
    arm_sweep();
  }
  void arm_sweep() {
    sweep_timer_.expires_after(sweep_every_);
    std::weak_ptr<LeasedStore*> alive = alive_;
    sweep_timer_.async_wait([alive](boost::system::error_code ec) {
      auto self = alive.lock();
      if (ec || !self) return;
      auto& store = **self;
      LeaseBook::GiveBacks back;
      const bool kept = store.book_.sweep(store.clock_.now(), back);
      store.give_back(back);
      if (kept)
        store.arm_sweep();
      else
        store.sweeping_ = false;
    });
  }

  asio::io_context& ioc_;
  std::unique_ptr<LimitStore> inner_;
  LeaseBook& book_;
  const limit::Clock& clock_;
  std::chrono::milliseconds max_wait_;
  std::chrono::milliseconds sweep_every_;  // while any lease is kept; zero: the caller sweeps
  asio::steady_timer sweep_timer_;
  bool sweeping_ = false;
  std::shared_ptr<LeasedStore*> alive_;  // handlers hold it weakly: is this store still there
};

}  // namespace

std::unique_ptr<LimitStore> make_leased_store(asio::io_context& ioc,
                                              std::unique_ptr<LimitStore> inner, LeaseBook& book,
                                              const limit::Clock& clock,
                                              std::chrono::milliseconds max_wait,
                                              std::chrono::milliseconds sweep_every) {
  return std::make_unique<LeasedStore>(ioc, std::move(inner), book, clock, max_wait, sweep_every);
}

}  // namespace floodgate::store
