#pragma once
// /metrics: the counters of metrics/ in the Prometheus text format (0.0.4), with the process's
// own (process_*, from /proc). Rendering is admin's; counting is each component's.

#include <string>

#include "floodgate/metrics/metrics.hpp"

namespace floodgate::admin {

std::string render_prometheus(const metrics::Metrics& m);

}  // namespace floodgate::admin
