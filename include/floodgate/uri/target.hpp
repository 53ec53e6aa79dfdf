#pragma once
// A request target (RFC 9112 section 3.2) split the one way the proxy, its access log and the
// replay read it.

#include <optional>
#include <string>
#include <string_view>

#include "floodgate/uri/path_normalize.hpp"

namespace floodgate::uri {

// Origin-form ("/a?b") keeps its authority empty; absolute-form ("http://h/a?b") fills it (it
// then overrides Host, RFC 9112 section 3.2.2).
struct Target {
  std::string_view authority;
  std::string_view path;         // starts with '/'
  std::string_view query;        // without '?'
  std::string_view origin_form;  // path + query, what the upstream receives
};

// nullopt for a target a proxy must refuse: empty, relative, authority-form, an authority with
// userinfo, an absolute form without a path before its query, or bytes not allowed in a target.
std::optional<Target> parse_target(std::string_view target);

// As parse_target without judging the bytes: for text that was a request some server took
// already (a log line), where only the split matters.
std::optional<Target> split_target(std::string_view target);

// Puts `t` in the form it is routed, keyed, logged and forwarded in, so that the origin serves
// exactly what was limited: `path` normalized (normalize_path, with encoded separators kept for
// the route to allow or refuse), `origin_form` that path and then the query exactly as
// received. `storage` owns the new text. Returns the normalizer's verdict (its `path` moved
// into `storage`); on an error `t` is unchanged.
NormalizedPath normalize_target(Target& t, std::string& storage);

}  // namespace floodgate::uri
