// Who is calling, by address: the forwarding header is believed only from trusted proxies and
// walked from the right; IPv4-mapped IPv6 is normalised; the address is whole (lists match it),
// and IPv6 is folded to a prefix only by fold_ipv6 (the `ip` key part).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "floodgate/config/address.hpp"
#include "floodgate/keys/client_ip.hpp"

using floodgate::config::ClientIpSettings;
using floodgate::config::IpAddress;
using floodgate::config::parse_cidr;
using floodgate::config::parse_ip;
using floodgate::keys::client_ip;
using floodgate::keys::fold_ipv6;

namespace {

IpAddress ip(const std::string& text) {
  auto v = parse_ip(text);
  EXPECT_TRUE(v.has_value()) << text;
  return v.value_or(IpAddress{});
}

ClientIpSettings settings(std::vector<std::string> trusted, int ipv6_prefix = 64) {
  ClientIpSettings s;
  for (const auto& t : trusted)
    s.trusted_proxies.push_back(std::get<floodgate::config::Cidr>(parse_cidr(t)));
  s.ipv6_prefix = ipv6_prefix;
  return s;
}

std::string who(const std::string& peer, const std::string& header, const ClientIpSettings& s) {
  return client_ip(ip(peer), header, s).to_string();
}

struct Case {
  const char* peer;
  const char* header;
  const char* client;
  const char* why;
};

TEST(ClientIp, ForwardingHeaderWalk) {
  const auto s = settings({"10.0.0.0/8", "127.0.0.1/32", "2001:db8:ffff::/48"});
  const std::vector<Case> cases = {
      {"203.0.113.9", "", "203.0.113.9", "no header: the peer"},
      {"203.0.113.9", "1.2.3.4", "203.0.113.9", "an untrusted peer's header is ignored"},
      {"203.0.113.9", "10.0.0.7", "203.0.113.9", "even when it names a trusted address"},
      {"10.0.0.1", "1.2.3.4", "1.2.3.4", "a trusted peer's header is believed"},
      {"127.0.0.1", "1.2.3.4", "1.2.3.4", "a /32 trusted proxy"},
      {"10.0.0.1", "", "10.0.0.1", "a trusted peer with no header is the client"},
      {"10.0.0.1", "1.2.3.4, 10.0.0.2", "1.2.3.4", "trusted hops are skipped from the right"},
      {"10.0.0.1", "1.2.3.4, 5.6.7.8, 10.0.0.2, 10.0.0.3", "5.6.7.8",
       "the right-most untrusted entry wins"},
      {"10.0.0.1", "6.6.6.6, 1.2.3.4", "1.2.3.4", "a spoofed left entry is ignored"},
      {"10.0.0.1", "10.0.0.5, 10.0.0.6", "10.0.0.5", "all trusted: the left-most"},
      {"10.0.0.1", "10.0.0.5", "10.0.0.5", "one trusted entry: it"},
      {"10.0.0.1", "1.2.3.4, garbage, 10.0.0.2", "10.0.0.2",
       "garbage stops the walk at the last good address"},
      {"10.0.0.1", "1.2.3.4, garbage", "10.0.0.1", "garbage right of everything: the peer"},
      {"10.0.0.1", "garbage, 1.2.3.4", "1.2.3.4", "garbage left of the client does not matter"},
      {"10.0.0.1", "1.2.3.4,,10.0.0.2", "10.0.0.2", "an empty entry is garbage"},
      {"10.0.0.1", "1.2.3.4, unknown", "10.0.0.1", "RFC 7239 'unknown' is not an address"},
      {"10.0.0.1", "1.2.3.4, fe80::1%eth0", "10.0.0.1", "an IPv6 zone is not an identity"},
      {"10.0.0.1", "  1.2.3.4\t,\t10.0.0.2  ", "1.2.3.4", "spaces and tabs around entries"},
      {"10.0.0.1", "1.2.3.4:5678", "1.2.3.4", "IPv4 with a port"},
      {"10.0.0.1", "1.2.3.4:5678, 10.0.0.2:443", "1.2.3.4", "ports on trusted hops too"},
      {"10.0.0.1", "[2001:db8:1:2::7]:443", "2001:db8:1:2::7", "bracketed IPv6 with a port"},
      {"10.0.0.1", "[2001:db8:1:2::7]", "2001:db8:1:2::7", "bracketed IPv6 without a port"},
      {"10.0.0.1", "2001:db8:1:2::7", "2001:db8:1:2::7", "bare IPv6 is not mistaken for host:port"},
      {"2001:db8:ffff::1", "1.2.3.4", "1.2.3.4", "an IPv6 trusted proxy"},
      {"10.0.0.1", "1.2.3.4, 2001:db8:ffff::9", "1.2.3.4", "an IPv6 trusted hop is skipped"},
      {"::ffff:10.0.0.1", "1.2.3.4", "1.2.3.4", "a mapped peer matches an IPv4 CIDR"},
      {"10.0.0.1", "::ffff:1.2.3.4", "1.2.3.4", "a mapped entry becomes IPv4"},
      {"10.0.0.1", "1.2.3.4, ::ffff:10.0.0.9", "1.2.3.4", "a mapped trusted hop is skipped"},
      {"::ffff:203.0.113.9", "", "203.0.113.9", "a mapped untrusted peer becomes IPv4"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(who(c.peer, c.header, s), c.client)
        << c.why << "\n  peer " << c.peer << "\n  header \"" << c.header << "\"";
  }
}

TEST(ClientIp, NoTrustedProxiesMeansThePeerAlways) {
  const auto s = settings({});
  EXPECT_EQ(who("10.0.0.1", "1.2.3.4", s), "10.0.0.1");
  EXPECT_EQ(who("127.0.0.1", "1.2.3.4", s), "127.0.0.1");
}

TEST(ClientIp, MappedAddressesAreIPv4) {
  auto s = settings({});
  auto a = client_ip(ip("::ffff:192.0.2.1"), "", s);
  EXPECT_TRUE(a.is_v4());
  EXPECT_EQ(a, ip("192.0.2.1"));
  s.ipv6_prefix = 8;  // IPv4 is never folded, whatever the IPv6 prefix
  EXPECT_EQ(client_ip(ip("192.0.2.1"), "", s).to_string(), "192.0.2.1");
}

TEST(ClientIp, IPv6IsWholeWhateverThePrefix) {
  // Issue 34 item 3: folded here, ::1 became :: and a list naming ::1 never matched it.
  for (int prefix : {8, 64, 128}) {
    const auto s = settings({"10.0.0.0/8"}, prefix);
    EXPECT_EQ(who("::1", "", s), "::1") << prefix;
    EXPECT_EQ(who("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "", s), "2001:db8:1:2:aaaa:bbbb:cccc:dddd");
    EXPECT_EQ(who("10.0.0.1", "2001:db8:1:2::99", s), "2001:db8:1:2::99") << "through a proxy";
  }
  // What the `ip` key part keeps: two addresses in one /64 are one caller.
  const auto a = fold_ipv6(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), 64);
  EXPECT_EQ(a, fold_ipv6(ip("2001:db8:1:2::1"), 64));
  EXPECT_NE(a, fold_ipv6(ip("2001:db8:1:3::1"), 64));
  EXPECT_EQ(a.to_string(), "2001:db8:1:2::");
}

TEST(FoldIpv6, PrefixesOffByteBoundaries) {
  const auto full = ip("2001:db8:abcd:ef12:3456:789a:bcde:f012");
  EXPECT_EQ(fold_ipv6(full, 128), full);
  EXPECT_EQ(fold_ipv6(full, 64).to_string(), "2001:db8:abcd:ef12::");
  EXPECT_EQ(fold_ipv6(full, 56).to_string(), "2001:db8:abcd:ef00::");
  EXPECT_EQ(fold_ipv6(full, 60).to_string(), "2001:db8:abcd:ef10::");
  EXPECT_EQ(fold_ipv6(full, 48).to_string(), "2001:db8:abcd::");
  EXPECT_EQ(fold_ipv6(full, 33).to_string(), "2001:db8:8000::");
  EXPECT_EQ(fold_ipv6(full, 0).to_string(), "::");
  const auto v4 = ip("198.51.100.23");
  for (int prefix : {0, 8, 64, 96, 128}) EXPECT_EQ(fold_ipv6(v4, prefix), v4) << prefix;
}

}  // namespace
