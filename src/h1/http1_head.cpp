#include "http1_head.hpp"

#include <boost/beast/http/field.hpp>

namespace floodgate::http {

void take_http1_head(Exchange& x, const boost::beast::http::request_header<>& req,
                     bool can_continue) {
  x.fields = &req;
  x.method = req.method_string();
  x.raw_target = req.target();
  x.host_field = req[boost::beast::http::field::host];
  x.version = req.version();
  x.can_continue = can_continue;
}

}  // namespace floodgate::http
