#pragma once
// One worker's context as the fuzz targets that drive whole connections need it (the client
// side's fuzz_h2_frames, the upstream side's fuzz_h2_upstream): the real WorkerContext over
// an in-process store, a null log, a fixed clock, on the target's io_context.

#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include <memory>

#include "floodgate/config/config_source.hpp"
#include "floodgate/limit/clock.hpp"
#include "floodgate/metrics/metrics.hpp"
#include "floodgate/store/memory_store.hpp"
#include "http/worker_context.hpp"
#include "support.hpp"

namespace floodgate::fuzz {

struct WorkerFixture {
  WorkerFixture(boost::asio::io_context& ioc, config::ConfigPtr config)
      : source(std::move(config)),
        store(std::make_unique<store::MemoryStore>(state, ioc.get_executor())),
        local(std::make_unique<store::MemoryStore>(state, ioc.get_executor())),
        w{source,
          *log,
          clock,
          http::UpstreamPool(ioc.get_executor()),
          decide::Gate(*store, *local, metrics, *log, "fuzz:"),
          metrics,
          http::UpstreamBalancer(health)} {
    w.access_log = log.get();
  }
  // Declaration order is construction order: `w` uses everything above it.
  config::ConfigSource source;
  metrics::Metrics metrics{"fuzz", "fuzz"};
  std::shared_ptr<spdlog::logger> log =
      std::make_shared<spdlog::logger>("fuzz", std::make_shared<spdlog::sinks::null_sink_mt>());
  limit::FakeClock clock{kNowSeconds * limit::kMicrosPerSecond};
  store::MemoryState state{clock, 1000};
  http::UpstreamHealth health;
  std::unique_ptr<store::LimitStore> store;
  std::unique_ptr<store::LimitStore> local;
  http::WorkerContext w;
};

}  // namespace floodgate::fuzz
