#pragma once
// One worker's services as the fuzz targets that drive whole connections need them (the
// client side's fuzz_h2_frames: the fronts' Services; the upstream side's fuzz_h2_upstream:
// the h2 pool): the real ones over an in-process store, a null log, a fixed clock, on the
// target's io_context.

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include <memory>

#include "exchange/services.hpp"
#include "floodgate/config/config_source.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/memory_store.hpp"
#include "h2/upstream_h2.hpp"
#include "net/upstreams.hpp"
#include "server/upstream_proxy.hpp"
#include "support.hpp"

namespace floodgate::fuzz {

struct WorkerFixture {
  WorkerFixture(boost::asio::io_context& ioc, config::ConfigPtr config)
      : source(std::move(config)),
        store(std::make_unique<store::MemoryStore>(state, ioc.get_executor())),
        local(std::make_unique<store::MemoryStore>(state, ioc.get_executor())),
        gate(*store, *local, metrics, *log, "fuzz:"),
        upstreams(ioc.get_executor(), health, *log, metrics) {}
  // Declaration order is construction order: each uses what is above it.
  config::ConfigSource source;
  metrics::Metrics metrics{"fuzz", "fuzz"};
  std::shared_ptr<spdlog::logger> log =
      std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  limit::FakeClock clock{kNowSeconds * limit::kMicrosPerSecond};
  store::MemoryState state{clock, 1000};
  http::UpstreamHealth health;
  std::unique_ptr<store::LimitStore> store;
  std::unique_ptr<store::LimitStore> local;
  decide::Gate gate;
  http::Upstreams upstreams;
  http::H2UpstreamPool h2_pool{upstreams.pool};
  http::UpstreamProxy proxy{upstreams, h2_pool, gate};
  http::Services w{source, clock, gate, proxy, *log, *log, nullptr, metrics};
};

}  // namespace floodgate::fuzz
