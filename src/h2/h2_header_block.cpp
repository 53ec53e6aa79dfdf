#include "h2_header_block.hpp"

namespace floodgate::http {

void add_upstream_request(H2HeaderBlock& block, const RequestHead& req,
                          const config::UpstreamServer& u, bool te_trailers) {
  block.add(":method", req.method);
  block.add(":scheme", u.tls ? "https" : "http");
  block.add(":authority", req.fields.get("host"));
  block.add(":path", req.target);
  for (const auto& f : req.fields)
    if (!Fields::named(f, "host")) block.add(f.name, f.value);
  if (te_trailers) block.add("te", "trailers");
}

}  // namespace floodgate::http
