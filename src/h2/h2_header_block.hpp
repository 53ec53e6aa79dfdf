#pragma once
// Header blocks in the form nghttp2 takes them.

#include <nghttp2/nghttp2.h>

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "exchange/fields.hpp"
#include "exchange/header_block.hpp"
#include "floodgate/config/config.hpp"

namespace floodgate::http {

// A header block as nghttp2_submit_response, _request or _trailer takes it (names lower-case;
// nghttp2 copies the pairs in turn).
class H2HeaderBlock : public HeaderBlock {
 public:
  using HeaderBlock::HeaderBlock;
  // The pairs in the order added; valid until the next add.
  std::span<const nghttp2_nv> pairs() {
    pairs_into<nghttp2_nv>(nva_, NGHTTP2_NV_FLAG_NONE);
    return nva_;
  }

 private:
  boost::container::small_vector<nghttp2_nv, 16> nva_;
};

// The request `req` (its head rewritten for upstream `u` by prepare_upstream_head) as an
// h2 upstream receives it: pseudo-headers from its method, target and Host, then its fields
// (Host aside); `te: trailers` again when the client asked for trailers (gRPC needs it;
// TE is otherwise hop-by-hop).
void add_upstream_request(H2HeaderBlock& block, const RequestHead& req,
                          const config::UpstreamServer& u, bool te_trailers);

}  // namespace floodgate::http
