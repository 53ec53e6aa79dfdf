#pragma once
// One GET over verified HTTPS, on the caller's thread, within a deadline: what the background
// fetchers (jwt.jwks, config_source) ask their servers. Errors are values.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "floodgate/config/remote.hpp"

namespace floodgate::app {

struct HttpsRequest {
  std::string_view target;  // the path and query asked for
  std::string_view accept;
  std::string_view if_none_match;  // sent as If-None-Match when not empty
  std::size_t max_body = 1 << 20;
  std::chrono::milliseconds timeout{5000};  // connect to body
};

struct HttpsAnswer {
  int status = 0;
  std::string body;
  std::string etag;
  std::string error;  // empty: an answer came (of any status)
};

HttpsAnswer https_get(const config::HttpsUrl& server, const HttpsRequest& request);

}  // namespace floodgate::app
