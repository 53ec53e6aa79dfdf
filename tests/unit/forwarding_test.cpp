// Header hygiene between client and upstream, and request-target parsing.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exchange/forwarding.hpp"
#include "floodgate/decide/router.hpp"
#include "floodgate/uri/target.hpp"

using floodgate::decide::refuses_encoded_separators;
using floodgate::http::add_forwarding_headers;
using floodgate::http::Fields;
using floodgate::http::ForwardedFor;
using floodgate::http::is_websocket_upgrade;
using floodgate::http::strip_hop_by_hop;
using floodgate::uri::normalize_target;
using floodgate::uri::parse_target;

namespace {

std::vector<std::string> names_of(const Fields& f) {
  std::vector<std::string> out;
  for (const auto& h : f) out.emplace_back(h.name);
  return out;
}

std::size_t count(const Fields& f, std::string_view name) {
  return f.count(name);
}

std::string value(const Fields& f, std::string_view name) {
  auto found = f.find(name);
  return found ? std::string(*found) : std::string("<absent>");
}

// ---------------------------------------------------------------- strip_hop_by_hop

TEST(StripHopByHop, RemovesTheHopByHopListAndKeepsEndToEndHeaders) {
  Fields f;
  f.add("Host", "shop.example");
  f.add("Connection", "keep-alive, Upgrade");
  f.add("Keep-Alive", "timeout=5");
  f.add("Proxy-Connection", "keep-alive");
  f.add("TE", "trailers");
  f.add("Trailer", "X-Checksum");
  f.add("Transfer-Encoding", "chunked");
  f.add("Upgrade", "websocket");
  f.add("Proxy-Authenticate", "Basic");
  f.add("Proxy-Authorization", "Basic Zm9vOmJhcg==");
  f.add("Content-Length", "12");
  f.add("Authorization", "Bearer abc");
  f.add("Content-Type", "application/json");
  f.add("Cookie", "a=1");
  f.add("Accept", "*/*");
  f.add("X-Request-Id", "r-1");

  strip_hop_by_hop(f);

  for (const char* gone :
       {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
        "Upgrade", "Proxy-Authenticate", "Proxy-Authorization", "Content-Length"})
    EXPECT_EQ(count(f, gone), 0u) << gone << " was forwarded";
  EXPECT_EQ(value(f, "Host"), "shop.example");
  EXPECT_EQ(value(f, "Authorization"), "Bearer abc");  // end-to-end, unlike Proxy-Authorization
  EXPECT_EQ(value(f, "Content-Type"), "application/json");
  EXPECT_EQ(value(f, "Cookie"), "a=1");
  EXPECT_EQ(value(f, "Accept"), "*/*");
  EXPECT_EQ(value(f, "X-Request-Id"), "r-1");
  EXPECT_EQ(names_of(f).size(), 6u);
}

TEST(StripHopByHop, RemovesHeadersNamedInConnection) {
  Fields f;
  f.add("Connection", "close, X-Secret-Hop");
  f.add("x-secret-hop", "1");  // names are case-insensitive
  f.add("X-Kept", "2");
  strip_hop_by_hop(f);
  EXPECT_EQ(count(f, "X-Secret-Hop"), 0u);
  EXPECT_EQ(value(f, "X-Kept"), "2");
  EXPECT_EQ(count(f, "Connection"), 0u);
}

// RFC 9110 lets Connection name any field, but not these: "Connection: Host" would send the
// upstream a request without Host, and naming X-Forwarded-For would erase the chain a trusted
// proxy in front of us built.
TEST(StripHopByHop, ConnectionCannotNameRoutingFramingOrForwardingFields) {
  Fields f;
  f.add("Connection",
        "Host, content-length, Transfer-Encoding, X-Forwarded-For, x-forwarded-proto, Via, "
        "Forwarded, X-Real-IP, X-Other");
  f.add("Host", "shop.example");
  f.add("X-Forwarded-For", "203.0.113.7");
  f.add("X-Forwarded-Proto", "https");
  f.add("Via", "1.1 edge");
  f.add("Forwarded", "for=203.0.113.7");
  f.add("X-Real-IP", "203.0.113.7");
  f.add("X-Other", "gone");
  strip_hop_by_hop(f);
  EXPECT_EQ(value(f, "Host"), "shop.example");
  EXPECT_EQ(value(f, "X-Forwarded-For"), "203.0.113.7");
  EXPECT_EQ(value(f, "X-Forwarded-Proto"), "https");
  EXPECT_EQ(value(f, "Via"), "1.1 edge");
  EXPECT_EQ(value(f, "Forwarded"), "for=203.0.113.7");
  EXPECT_EQ(value(f, "X-Real-IP"), "203.0.113.7");
  EXPECT_EQ(count(f, "X-Other"), 0u);  // the rest of the list still counts
  EXPECT_EQ(count(f, "Connection"), 0u);

  // Framing is re-established by the caller: Content-Length and Transfer-Encoding go either
  // way, so that naming them changes nothing about what leaves.
  Fields framed;
  framed.add("Connection", "Content-Length");
  framed.add("Content-Length", "5");
  strip_hop_by_hop(framed);
  EXPECT_EQ(count(framed, "Content-Length"), 0u);
}

TEST(StripHopByHop, ConnectionTokensWithOddWhitespaceAndEmptyItems) {
  Fields f;
  f.add("Connection", " ,X-A ,\t, \tX-B\t,");
  f.add("X-A", "a");
  f.add("X-B", "b");
  f.add("X-C", "c");
  strip_hop_by_hop(f);
  EXPECT_EQ(count(f, "X-A"), 0u);
  EXPECT_EQ(count(f, "X-B"), 0u);
  EXPECT_EQ(value(f, "X-C"), "c");
}

TEST(StripHopByHop, EveryConnectionLineCounts) {
  // Two Connection lines, with other headers between them as they arrived.
  Fields f;
  f.add("Connection", "X-First");
  f.add("X-First", "1");
  f.add("X-Between", "kept");
  f.add("Connection", "X-Second");
  f.add("X-Second", "2");
  strip_hop_by_hop(f);
  EXPECT_EQ(count(f, "X-First"), 0u);
  EXPECT_EQ(count(f, "X-Second"), 0u);
  EXPECT_EQ(count(f, "Connection"), 0u);
  EXPECT_EQ(value(f, "X-Between"), "kept");
}

TEST(StripHopByHop, RepeatedHopByHopHeadersAreAllRemoved) {
  Fields f;
  f.add("Transfer-Encoding", "gzip");
  f.add("Accept", "*/*");
  f.add("Transfer-Encoding", "chunked");
  f.add("Content-Length", "5");
  f.add("Content-Length", "6");
  strip_hop_by_hop(f);
  EXPECT_EQ(count(f, "Transfer-Encoding"), 0u);
  EXPECT_EQ(count(f, "Content-Length"), 0u);
  EXPECT_EQ(value(f, "Accept"), "*/*");
}

TEST(StripHopByHop, NothingToStrip) {
  Fields f;
  f.add("Host", "h");
  f.add("X-Forwarded-For", "1.2.3.4");
  strip_hop_by_hop(f);
  EXPECT_EQ(names_of(f), (std::vector<std::string>{"Host", "X-Forwarded-For"}));
}

// ---------------------------------------------------------------- add_forwarding_headers

TEST(AddForwardingHeaders, SetsAllThreeOnAFreshRequest) {
  Fields f;
  add_forwarding_headers(f, ForwardedFor{"192.0.2.10", false, "fra1"});
  EXPECT_EQ(value(f, "X-Forwarded-For"), "192.0.2.10");
  EXPECT_EQ(value(f, "X-Forwarded-Proto"), "http");
  EXPECT_EQ(value(f, "Via"), "1.1 fra1");
}

TEST(AddForwardingHeaders, AppendsToExistingLists) {
  Fields f;
  f.add("X-Forwarded-For", "203.0.113.1");
  f.add("Via", "1.0 fred");
  add_forwarding_headers(f, ForwardedFor{"10.0.0.2", true, "ams2"});
  EXPECT_EQ(value(f, "X-Forwarded-For"), "203.0.113.1, 10.0.0.2");
  EXPECT_EQ(value(f, "Via"), "1.0 fred, 1.1 ams2");
  EXPECT_EQ(value(f, "X-Forwarded-Proto"), "https");
  EXPECT_EQ(count(f, "X-Forwarded-For"), 1u);
  EXPECT_EQ(count(f, "Via"), 1u);
}

TEST(AddForwardingHeaders, JoinsRepeatedHeaderLinesInOrder) {
  Fields f;
  f.add("X-Forwarded-For", "198.51.100.1");
  f.add("Accept", "*/*");
  f.add("x-forwarded-for", "198.51.100.2, 198.51.100.3");  // any case
  f.add("Via", "1.1 a");
  f.add("Via", "1.1 b");
  add_forwarding_headers(f, ForwardedFor{"2001:db8::7", false, "pop"});
  EXPECT_EQ(count(f, "X-Forwarded-For"), 1u);
  EXPECT_EQ(value(f, "X-Forwarded-For"), "198.51.100.1, 198.51.100.2, 198.51.100.3, 2001:db8::7");
  EXPECT_EQ(count(f, "Via"), 1u);
  EXPECT_EQ(value(f, "Via"), "1.1 a, 1.1 b, 1.1 pop");
  EXPECT_EQ(value(f, "Accept"), "*/*");
}

TEST(AddForwardingHeaders, ProtoIsReplacedNotTrusted) {
  // A client cannot claim https through a plain connection.
  Fields f;
  f.add("X-Forwarded-Proto", "https");
  f.add("X-Forwarded-Proto", "https");
  add_forwarding_headers(f, ForwardedFor{"192.0.2.1", false, "p"});
  EXPECT_EQ(count(f, "X-Forwarded-Proto"), 1u);
  EXPECT_EQ(value(f, "X-Forwarded-Proto"), "http");
}

// ---------------------------------------------------------------- parse_target

TEST(ParseTarget, OriginForm) {
  auto t = parse_target("/a/b?x=1&y=2");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->authority, "");
  EXPECT_EQ(t->path, "/a/b");
  EXPECT_EQ(t->query, "x=1&y=2");
  EXPECT_EQ(t->origin_form, "/a/b?x=1&y=2");

  t = parse_target("/");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->path, "/");
  EXPECT_EQ(t->query, "");
  EXPECT_EQ(t->origin_form, "/");

  t = parse_target("/a?");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->path, "/a");
  EXPECT_EQ(t->query, "");

  t = parse_target("/s?q=a?b/c");  // only the first '?' separates
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->path, "/s");
  EXPECT_EQ(t->query, "q=a?b/c");

  t = parse_target("/caf%C3%A9/~user[1]");  // percent-encoding and sub-delims are fine
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->path, "/caf%C3%A9/~user[1]");
}

TEST(ParseTarget, AbsoluteForm) {
  auto t = parse_target("http://example.com/a?b=1");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->authority, "example.com");
  EXPECT_EQ(t->path, "/a");
  EXPECT_EQ(t->query, "b=1");
  EXPECT_EQ(t->origin_form, "/a?b=1");

  t = parse_target("https://api.example:8443/v1/x");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->authority, "api.example:8443");
  EXPECT_EQ(t->path, "/v1/x");
  EXPECT_EQ(t->origin_form, "/v1/x");

  t = parse_target("http://example.com");  // no path: "/"
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->authority, "example.com");
  EXPECT_EQ(t->path, "/");
  EXPECT_EQ(t->origin_form, "/");

  t = parse_target("http://[::1]:8080/p");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->authority, "[::1]:8080");
  EXPECT_EQ(t->path, "/p");
}

// ---------------------------------------------------------------- normalize_target

TEST(NormalizeTarget, PathNormalizedQueryKeptAsReceived) {
  struct Case {
    const char* target;
    const char* path;
    const char* query;
    const char* origin_form;
  };
  for (const auto& c : std::vector<Case>{
           {"//api/./x/../checkout?b=%2F..//&a=%7e", "/api/checkout", "b=%2F..//&a=%7e",
            "/api/checkout?b=%2F..//&a=%7e"},
           {"/api/%63heckout?", "/api/checkout", "", "/api/checkout?"},  // an empty query too
           {"/api/checkout", "/api/checkout", "", "/api/checkout"},
           {"/a%2fb?q=1", "/a%2Fb", "q=1", "/a%2Fb?q=1"},  // kept: the route decides
           {"http://Shop.Example./x//y?z", "/x/y", "z", "/x/y?z"},
       }) {
    auto t = parse_target(c.target);
    ASSERT_TRUE(t) << c.target;
    const auto authority = t->authority;
    std::string storage;
    auto normal = normalize_target(*t, storage);
    ASSERT_TRUE(normal) << c.target;
    EXPECT_EQ(t->path, c.path) << c.target;
    EXPECT_EQ(t->query, c.query) << c.target;
    EXPECT_EQ(t->origin_form, c.origin_form) << c.target;
    EXPECT_EQ(t->authority, authority) << c.target;
  }
}

TEST(NormalizeTarget, EncodedSeparatorsOnlyForARouteThatAllowsThem) {
  floodgate::config::Route strict;
  floodgate::config::Route open;
  open.allow_encoded_slashes = true;
  for (const char* target : {"/a%2Fb", "/a%5cb", "/a%00b"}) {
    auto t = parse_target(target);
    ASSERT_TRUE(t);
    std::string storage;
    auto normal = normalize_target(*t, storage);
    ASSERT_TRUE(normal) << target;
    EXPECT_TRUE(refuses_encoded_separators(normal, &strict)) << target;
    EXPECT_TRUE(refuses_encoded_separators(normal, nullptr)) << target;
    EXPECT_FALSE(refuses_encoded_separators(normal, &open)) << target;
  }
  auto t = parse_target("/a/b");
  std::string storage;
  EXPECT_FALSE(refuses_encoded_separators(normalize_target(*t, storage), &strict));

  t = parse_target("/a%zz?q");  // refused: the target is left as it was
  auto bad = normalize_target(*t, storage);
  EXPECT_EQ(bad.error, floodgate::uri::PathError::bad_escape);
  EXPECT_EQ(t->origin_form, "/a%zz?q");
}

TEST(ParseTarget, RejectsWhatAProxyMustRefuse) {
  for (std::string_view bad : {
           std::string_view(""),
           std::string_view("*"),                // asterisk-form
           std::string_view("example.com:443"),  // authority-form (CONNECT)
           std::string_view("a/b"),              // relative
           std::string_view("ftp://h/x"),        // another scheme
           std::string_view("http://"),          // no authority
           std::string_view("http:///x"),        // empty authority
           std::string_view("http://user@h/x"),  // userinfo
           std::string_view("http://h?x=1"),     // query without a path
           std::string_view("/a b"),             // space
           std::string_view("/a#frag"),          // fragment
           std::string_view("/a\tb"),            // control
           std::string_view("/a\r\nX-Injected: 1"),
           std::string_view("/a\0b", 4),      // NUL
           std::string_view("/\x7f"),         // DEL
           std::string_view("/caf\xc3\xa9"),  // raw non-ASCII
           std::string_view("/a\"b"),
           std::string_view("/a<b>"),
           std::string_view("/a\\b"),
           std::string_view("/a^b"),
           std::string_view("/a`b"),
           std::string_view("/{a}"),
           std::string_view("/a|b"),
       }) {
    EXPECT_FALSE(parse_target(bad).has_value()) << "accepted: \"" << std::string(bad) << "\"";
  }
}

// ---------------------------------------------------------------- is_websocket_upgrade

floodgate::http::RequestHead upgrade_request(
    std::string_view method, unsigned version,
    std::vector<std::pair<std::string, std::string>> fields) {
  floodgate::http::RequestHead req;
  req.set_method(method);
  req.version = version;
  for (const auto& [name, value] : fields) req.fields.add(name, value);
  return req;
}

TEST(WebSocketUpgrade, RecognisedWithTokensInAnyCaseOrPosition) {
  EXPECT_TRUE(is_websocket_upgrade(
      upgrade_request("GET", 11, {{"Connection", "Upgrade"}, {"Upgrade", "websocket"}})));
  // Browsers send "keep-alive, Upgrade"; Firefox too; case is not significant.
  EXPECT_TRUE(is_websocket_upgrade(upgrade_request(
      "GET", 11, {{"Connection", "keep-alive, Upgrade"}, {"Upgrade", "WebSocket"}})));
  // A list split over two Connection lines.
  EXPECT_TRUE(is_websocket_upgrade(upgrade_request(
      "GET", 11,
      {{"Connection", "keep-alive"}, {"Connection", " upgrade "}, {"Upgrade", "websocket"}})));
}

TEST(WebSocketUpgrade, OtherRequestsAreNotTunnelled) {
  // No Connection: upgrade token: Upgrade alone is just a header to drop.
  EXPECT_FALSE(is_websocket_upgrade(upgrade_request("GET", 11, {{"Upgrade", "websocket"}})));
  EXPECT_FALSE(is_websocket_upgrade(
      upgrade_request("GET", 11, {{"Connection", "Upgrade"}, {"Upgrade", "h2c"}})));
  EXPECT_FALSE(is_websocket_upgrade(
      upgrade_request("POST", 11, {{"Connection", "Upgrade"}, {"Upgrade", "websocket"}})));
  EXPECT_FALSE(is_websocket_upgrade(
      upgrade_request("GET", 10, {{"Connection", "Upgrade"}, {"Upgrade", "websocket"}})));
  // A token that merely contains the word.
  EXPECT_FALSE(is_websocket_upgrade(
      upgrade_request("GET", 11, {{"Connection", "Upgraded"}, {"Upgrade", "websocket"}})));
}

}  // namespace
