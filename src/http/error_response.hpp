#pragma once
// The responses floodgate writes itself: a status, a one-line body, and the connection
// policy. Each status has one fixed line, so clients and tests can rely on it.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace floodgate::http {

using StringResponse = boost::beast::http::response<boost::beast::http::string_body>;

// `version` is the client's HTTP version (10 or 11). `keep_alive` false adds Connection: close.
StringResponse error_response(boost::beast::http::status status, unsigned version, bool keep_alive);

}  // namespace floodgate::http
