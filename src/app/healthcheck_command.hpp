#pragma once

#include <string_view>
#include <vector>

namespace floodgate::app {

// `floodgate healthcheck [HOST:PORT]` (args[0] is "healthcheck"): GET /healthz on the admin
// listener at HOST:PORT (default: $FLOODGATE_ADMIN_HEALTH, else 127.0.0.1:9901) and exit 0 on
// a 200 within 2 s, 1 otherwise with the reason on stderr. It is the container's HEALTHCHECK:
// the runtime image carries no shell and no curl.
int healthcheck_command(const std::vector<std::string_view>& args);

}  // namespace floodgate::app
