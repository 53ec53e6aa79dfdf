#pragma once
// HTTP/1.x renderings of the answers floodgate gives itself (reply.hpp): complete, so that
// each leaves in one write.

#include <boost/beast/http/status.hpp>

#include <string_view>

#include "exchange/exchange.hpp"
#include "wire.hpp"

namespace floodgate::http {

// `version` is the client's HTTP version (10 or 11). `keep_alive` false adds Connection: close.
// `x`, when given, is the exchange answered: its request id goes in.
Answer render(Reply reply, unsigned version, bool keep_alive, const Exchange* x = nullptr);

// A status of ours with its fixed line; `retry_after`, when not empty, becomes a Retry-After
// header.
Answer error_response(boost::beast::http::status status, unsigned version, bool keep_alive,
                      std::string_view retry_after = {});

}  // namespace floodgate::http
