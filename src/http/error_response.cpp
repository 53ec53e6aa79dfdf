#include "error_response.hpp"

namespace floodgate::http {

namespace bhttp = boost::beast::http;

namespace {

const char* line_for(bhttp::status s) {
  switch (s) {
    case bhttp::status::bad_request:
      return "bad request\n";
    case bhttp::status::unauthorized:
      return "a valid token is required\n";
    case bhttp::status::not_found:
      return "no route for this request\n";
    case bhttp::status::request_timeout:
      return "request timed out\n";
    case bhttp::status::payload_too_large:
      return "request body too large\n";
    case bhttp::status::request_header_fields_too_large:
      return "request header too large\n";
    case bhttp::status::bad_gateway:
      return "upstream unreachable\n";
    case bhttp::status::service_unavailable:
      return "service unavailable\n";
    case bhttp::status::gateway_timeout:
      return "upstream timed out\n";
    default:
      return "error\n";
  }
}

}  // namespace

Answer error_response(bhttp::status status, unsigned version, bool keep_alive,
                      std::string_view retry_after) {
  AnswerWriter w(static_cast<unsigned>(status), version, keep_alive);
  if (!retry_after.empty()) w.header("Retry-After", retry_after);
  return std::move(w).finish("text/plain; charset=utf-8", line_for(status));
}

}  // namespace floodgate::http
