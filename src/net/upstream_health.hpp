#pragma once
// Which servers of an upstream may be sent requests, and which one a request goes to.
//
// ServerHealth is one server's state, shared by every worker through atomics: the active
// checks' verdict (written by the checker on worker 0, health_checks.cpp), the passive
// ejection (a run of failed requests on any worker takes the server out for a cool-down),
// and the requests in flight to it (least_requests). The board keeps one per upstream and
// server for the life of the process, so a reload that keeps a server keeps its state.
//
// UpstreamBalancer is a worker's own: it picks among the servers that are up, by smooth
// weighted round robin (as nginx's) or by fewest requests in flight per unit of weight. When
// none is up, every server is a candidate again (Envoy's panic mode): a pool whose checks all
// fail, or whose servers were all ejected, still tries rather than answer 502 on a guess.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "floodgate/config/config.hpp"
#include "floodgate/metrics/metrics.hpp"

namespace floodgate::http {

struct ServerHealth {
  using clock = std::chrono::steady_clock;
  std::string upstream;
  std::string url;
  std::atomic<bool> checked_up{true};        // the active checks' verdict (none: up)
  std::atomic<clock::rep> ejected_until{0};  // passive ejection, steady_clock ticks
  std::atomic<int> failures{0};              // failed requests in a row
  std::atomic<std::int64_t> in_flight{0};    // requests on their way, every worker's
  std::atomic<std::uint64_t> requests{0};    // sent to it (each attempt)
  std::atomic<std::uint64_t> failed{0};      // connect failures, timeouts and 5xx
  std::atomic<std::uint64_t> ejections{0};
  std::atomic<std::uint64_t> checks_failed{0};
  // The checker's own (worker 0's loop only): the run of results and when to check next.
  int passes = 0;
  int misses = 0;
  bool checking = false;
  clock::time_point next_check{};

  bool up(clock::time_point now) const {
    return checked_up.load(std::memory_order_relaxed) &&
           ejected_until.load(std::memory_order_relaxed) <= now.time_since_epoch().count();
  }
};

class UpstreamHealth {
 public:
  // The server's state, created up on first use; stable for the life of the board.
  ServerHealth& of(const config::UpstreamServer& s);
  // A request's end on a server: a failure counts toward ejection, anything else ends the
  // run. Returns true when this failure ejected the server.
  bool record(ServerHealth& h, const config::Ejection& e, bool failed,
              ServerHealth::clock::time_point now);
  // The counters of `current`'s servers, for the metrics (a server a reload removed is left
  // out: its last state would alert for ever).
  std::vector<metrics::UpstreamServerSample> samples(const config::Config& current) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<ServerHealth>, std::less<>> servers_;
};

// A request's hold on its server: counted in flight until it ends.
class ServerUse {
 public:
  ServerUse() = default;
  ServerUse(const config::Upstream& up, const config::UpstreamServer& s, ServerHealth& h)
      : upstream_(&up), server_(&s), health_(&h) {
    h.in_flight.fetch_add(1, std::memory_order_relaxed);
    h.requests.fetch_add(1, std::memory_order_relaxed);
  }
  ~ServerUse() { release(); }
  ServerUse(ServerUse&& o) noexcept { *this = std::move(o); }
  ServerUse& operator=(ServerUse&& o) noexcept {
    if (this != &o) {
      release();
      upstream_ = std::exchange(o.upstream_, nullptr);
      server_ = std::exchange(o.server_, nullptr);
      health_ = std::exchange(o.health_, nullptr);
      recorded_ = std::exchange(o.recorded_, false);
    }
    return *this;
  }
  explicit operator bool() const { return server_ != nullptr; }
  const config::Upstream& upstream() const { return *upstream_; }
  const config::UpstreamServer& server() const { return *server_; }
  ServerHealth& health() const { return *health_; }
  // A request's outcome is recorded once, however many places see it fail.
  bool first_outcome() { return !std::exchange(recorded_, true); }

 private:
  void release() {
    if (health_) health_->in_flight.fetch_sub(1, std::memory_order_relaxed);
    health_ = nullptr;
  }
  const config::Upstream* upstream_ = nullptr;
  const config::UpstreamServer* server_ = nullptr;
  ServerHealth* health_ = nullptr;
  bool recorded_ = false;
};

class UpstreamBalancer {
 public:
  explicit UpstreamBalancer(UpstreamHealth& health) : health_(health) {}
  // The server for a request to `up` (one of `config`'s upstreams), other than `avoid` when
  // given: null then if the upstream has no other server.
  ServerUse pick(const config::ConfigPtr& config, const config::Upstream& up,
                 const config::UpstreamServer* avoid = nullptr);
  UpstreamHealth& health() { return health_; }

 private:
  using Pools = std::vector<std::vector<ServerHealth*>>;  // by upstream, then server index
  // The servers' states of a snapshot: the last two are kept, since requests under the old
  // one and the new one interleave for a while after a reload.
  const Pools& pools(const config::ConfigPtr& config);
  UpstreamHealth& health_;
  std::pair<config::ConfigPtr, Pools> seen_[2];  // held: an address is never reused meanwhile
  std::uint64_t turn_ = 0;                       // least_requests' tie-breaker
  // Smooth round robin's running weights, by server: across reloads, so that a reload does
  // not send the next requests to the first server.
  std::unordered_map<const ServerHealth*, std::int64_t> current_;
};

}  // namespace floodgate::http
