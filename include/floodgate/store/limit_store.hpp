#pragma once
// The one store interface. A request's limits are acquired in one atomic operation: every
// enforcing limit is checked, and only if all admit is any of them charged. Memory and
// Redis implement it; only app/ chooses. Completions never run inline on the caller's stack.

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "floodgate/limit/algorithm.hpp"

namespace floodgate::store {

struct Item {
  std::string key;  // the full store key (prefix, route, limit, hashed caller)
  limit::Params params;
  std::int64_t cost = 1;
  bool enforce = true;  // shadow limits are decided and charged when they admit, never refuse
  std::string lease;    // concurrency / sliding_log: unique per request (Redis lease and log ids)
};

struct Outcome {
  bool admitted = false;                   // every enforcing item admitted
  limit::Micros now = 0;                   // the store's clock at the decision
  std::vector<limit::Decision> decisions;  // one per item, in order
};

enum class StoreError { timeout, unavailable, protocol };
const char* to_string(StoreError e);

using AcquireResult = std::variant<Outcome, StoreError>;

class LimitStore {
 public:
  using Handler = boost::asio::any_completion_handler<void(AcquireResult)>;

  virtual ~LimitStore() = default;
  virtual void async_acquire(std::vector<Item> items, Handler handler) = 0;
  // Post-response corrections: settle a true cost (delta > 0 charges, < 0 refunds).
  virtual void adjust(const Item& item, std::int64_t delta) = 0;
  // Returns a concurrency lease.
  virtual void release(const Item& item) = 0;

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
