#include "http1_head.hpp"

namespace floodgate::http {

void take_http1_head(Exchange& x, const RequestHead& req, bool can_continue) {
  x.fields = &req.fields;
  x.method = req.method;
  x.raw_target = req.target;
  x.host_field = req.fields.get("host");
  x.version = req.version;
  x.can_continue = can_continue;
}

}  // namespace floodgate::http
