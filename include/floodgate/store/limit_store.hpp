#pragma once
// The one store interface. A request's limits are acquired in one atomic operation: every
// enforcing limit is checked, and only if all admit is any of them charged. Memory and
// Redis implement it; only app/ chooses. Completions never run inline on the caller's stack.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "floodgate/store/item.hpp"

namespace floodgate::store {

class LimitStore {
 public:
  using Handler = boost::asio::any_completion_handler<void(AcquireResult)>;

  virtual ~LimitStore() = default;
  virtual void async_acquire(std::vector<Item> items, Handler handler) = 0;
  // Post-response corrections: settle a true cost (delta > 0 charges, < 0 refunds).
  virtual void adjust(const Item& item, std::int64_t delta) = 0;
  // Returns a concurrency lease.
  virtual void release(const Item& item) = 0;
  // The admin API's reset: the key's state is forgotten (a whole quota again); what leases
  // hold of it stays held. Best effort, like adjust.
  virtual void reset(const Item& item) = 0;
  // Whether decisions are being made by the store right now (connected, breaker closed).
  // Read from the admin thread while the worker decides: implementations answer from atomics.
  virtual bool healthy() const = 0;
  // Drain: what the store holds for this instance goes back (leased units); `done` runs once
  // it has reached the store, or failed to (it may run inline).
  virtual void close(std::function<void()> done) { done(); }
  // A reload: `leased` describes every leased limit of the new config (route, limit and
  // terms); what the store holds under other terms goes back now.
  virtual void reconfigured(const std::string& leased) { (void)leased; }

  template <typename Token>
  auto acquire(std::vector<Item> items, Token&& token) {
    return boost::asio::async_initiate<Token, void(AcquireResult)>(
        [this](auto handler, std::vector<Item> batch) {
          async_acquire(std::move(batch), Handler(std::move(handler)));
        },
        token, std::move(items));
  }
};

}  // namespace floodgate::store
