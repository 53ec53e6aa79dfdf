#pragma once
// What the admin listener asks of the traffic side, behind an interface so that admin/ knows
// nothing of how the workers run: the server implements it, answering on its workers' loops.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "floodgate/limit/heavy_hitters.hpp"

namespace floodgate::decide {

// The admin API's /keys: one caller of one route's limit, by its key parts' values as /top
// shows them.
struct KeyRequest {
  std::string route;
  std::string limit;
  std::string caller;
  bool reset = false;  // DELETE: its state in the store is forgotten
};
struct KeyAnswer {
  int status = 200;
  std::string body;       // JSON
  std::string store_key;  // the caller's key in the store, when it was found
};

class WorkerControl {
 public:
  virtual ~WorkerControl() = default;
  // How many workers' store connections are healthy, of how many (memory: always all).
  virtual std::pair<int, int> store_health() const = 0;
  // Every worker's top offenders summaries (admin.top), each limit once per worker; a worker
  // that does not answer within `wait` (stopped) is left out.
  virtual std::vector<limit::LimitTop> top(std::chrono::milliseconds wait) const = 0;
  // A caller's state in the store (or, `reset`, its state forgotten and every worker's deny
  // cache told); 503 when no worker answers in `wait`.
  virtual KeyAnswer keys(const KeyRequest& request, std::chrono::milliseconds wait) const = 0;
};

}  // namespace floodgate::decide
