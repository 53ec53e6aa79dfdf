#pragma once
// The responses floodgate writes itself: a status, a one-line body, and the connection
// policy. Each status has one fixed line, so clients and tests can rely on it.

#include <boost/beast/http/status.hpp>

#include <string_view>

#include "wire.hpp"

namespace floodgate::http {

// `version` is the client's HTTP version (10 or 11). `keep_alive` false adds Connection: close.
// `retry_after`, when not empty, becomes a Retry-After header.
Answer error_response(boost::beast::http::status status, unsigned version, bool keep_alive,
                      std::string_view retry_after = {});

}  // namespace floodgate::http
