#include "error_response.hpp"

#include <boost/beast/http/field.hpp>

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

StringResponse error_response(bhttp::status status, unsigned version, bool keep_alive) {
  StringResponse res{status, version};
  res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  res.set(bhttp::field::server, "floodgate");
  res.body() = line_for(status);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

}  // namespace floodgate::http
