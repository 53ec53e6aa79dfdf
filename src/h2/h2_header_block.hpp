#pragma once
// Header blocks in the form nghttp2 takes and gives them.

#include <nghttp2/nghttp2.h>

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "exchange/fields.hpp"
#include "floodgate/config/config.hpp"

namespace floodgate::http {

// A header block as nghttp2_submit_response, _request or _trailer takes it (names lower-case),
// built without an allocation per field: every name and value is copied into one arena, and the
// name-value pairs point into it once it is complete (nghttp2 copies them in turn).
class H2HeaderBlock {
 public:
  H2HeaderBlock() = default;           // nothing allocated until the first add
  explicit H2HeaderBlock(int status);  // a response's, :status first
  void add(std::string_view name, std::string_view value);
  void add(std::string_view name, std::uint64_t number);  // the number in decimal
  // The pairs in the order added; valid until the next add.
  std::span<const nghttp2_nv> pairs();

 private:
  struct Entry {
    std::uint32_t name, name_len, value, value_len;  // offsets into arena_
  };
  std::string arena_;
  boost::container::small_vector<Entry, 16> entries_;
  boost::container::small_vector<nghttp2_nv, 16> nva_;
};

// The request `req` (its head rewritten for upstream `u` by prepare_upstream_head) as an
// h2 upstream receives it: pseudo-headers from its method, target and Host, then its fields
// (Host aside); `te: trailers` again when the client asked for trailers (gRPC needs it;
// TE is otherwise hop-by-hop).
void add_upstream_request(H2HeaderBlock& block, const RequestHead& req,
                          const config::UpstreamServer& u, bool te_trailers);

}  // namespace floodgate::http
