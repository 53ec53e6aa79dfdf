#pragma once
// The values a store decision is made of: what is asked (Item), what is answered (Outcome),
// and how asking can fail (StoreError). Plain data, no Asio: limit/ builds and reads these
// without depending on the asynchronous interface in limit_store.hpp.

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

}  // namespace floodgate::store
