// Durations, sizes, rates, endpoints, IP addresses and CIDR ranges as written in the config.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <variant>

#include "floodgate/config/address.hpp"
#include "floodgate/config/units.hpp"

using namespace floodgate::config;
using namespace std::chrono_literals;

namespace {

template <typename T>
bool ok(const Parsed<T>& p) {
  return std::holds_alternative<T>(p);
}

template <typename T>
std::string error_of(const Parsed<T>& p) {
  return ok(p) ? std::string("<no error>") : std::get<std::string>(p);
}

// ---------------------------------------------------------------- durations

TEST(ParseDuration, UnitsAreRequiredAndApplied) {
  struct Case {
    const char* text;
    Duration want;
  } cases[] = {
      {"45ms", 45ms}, {"10s", 10s},     {"1m", 1min},   {"1h", 1h},     {"1d", 24h},
      {"0s", 0ms},    {"1.5s", 1500ms}, {".5s", 500ms}, {"0.25m", 15s}, {"10 s", 10s},
  };
  for (const auto& c : cases) {
    auto p = parse_duration(c.text);
    ASSERT_TRUE(ok(p)) << c.text << ": " << error_of(p);
    EXPECT_EQ(std::get<Duration>(p), c.want) << c.text;
  }
}

TEST(ParseDuration, RejectsAmbiguousOrMalformedText) {
  for (const char* text : {"60", "", "s", "10sec", "10S", "10 seconds", "-1s", "+1s", "1e3s",
                           "1.2.3s", "ten s", "10ns", "1us", " 10s"}) {
    auto p = parse_duration(text);
    EXPECT_FALSE(ok(p)) << "\"" << text << "\" was accepted";
  }
  EXPECT_NE(error_of(parse_duration("60")).find("with a unit"), std::string::npos);
  // The units listed are the units accepted.
  EXPECT_NE(error_of(parse_duration("60")).find("(ms, s, m, h, d)"), std::string::npos);
  EXPECT_NE(error_of(parse_duration("60")).find("\"60\""), std::string::npos);
}

TEST(ParseDuration, RejectsSubMillisecondAndHugeValues) {
  EXPECT_NE(error_of(parse_duration("0.5ms")).find("finer than 1ms"), std::string::npos);
  EXPECT_NE(error_of(parse_duration("1.0001s")).find("finer than 1ms"), std::string::npos);
  EXPECT_NE(error_of(parse_duration("99999999999h")).find("too long"), std::string::npos);
}

TEST(FormatDuration, PicksTheLargestExactUnit) {
  EXPECT_EQ(format_duration(2h), "2h");
  EXPECT_EQ(format_duration(90min), "90m");
  EXPECT_EQ(format_duration(60s), "1m");
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(0ms), "0ms");
}

// ---------------------------------------------------------------- sizes

TEST(ParseSize, BinaryUnits) {
  struct Case {
    const char* text;
    std::uint64_t want;
  } cases[] = {
      {"512", 512},
      {"512B", 512},
      {"0", 0},
      {"16KiB", 16 * 1024},
      {"16KB", 16 * 1024},  // like nginx: K means KiB
      {"16K", 16 * 1024},
      {"16k", 16 * 1024},
      {"10MiB", 10 * 1024 * 1024},
      {"10m", 10 * 1024 * 1024},
      {"1GiB", 1024ull * 1024 * 1024},
      {"1.5KiB", 1536},
  };
  for (const auto& c : cases) {
    auto p = parse_size(c.text);
    ASSERT_TRUE(ok(p)) << c.text << ": " << error_of(p);
    EXPECT_EQ(std::get<std::uint64_t>(p), c.want) << c.text;
  }
}

TEST(ParseSize, RejectsBadText) {
  for (const char* text : {"", "KiB", "10XB", "-1", "1TiB", "1e3", "ten", "10 bytes", "0x10"})
    EXPECT_FALSE(ok(parse_size(text))) << "\"" << text << "\" was accepted";
  EXPECT_NE(error_of(parse_size("0.3KiB")).find("whole number of bytes"), std::string::npos);
  EXPECT_NE(error_of(parse_size("9999999GiB")).find("too large"), std::string::npos);
}

TEST(FormatSize, PicksTheLargestExactUnit) {
  EXPECT_EQ(format_size(16 * 1024), "16KiB");
  EXPECT_EQ(format_size(10 * 1024 * 1024), "10MiB");
  EXPECT_EQ(format_size(1000), "1000B");
  EXPECT_EQ(format_size(0), "0B");
}

// ---------------------------------------------------------------- rates

TEST(ParseRate, ConvertsToPerSecond) {
  struct Case {
    const char* text;
    double want;
  } cases[] = {
      {"10/s", 10.0},
      {"100/m", 100.0 / 60},
      {"0.5/h", 0.5 / 3600},
      {"0.5/s", 0.5},
      {"3600/h", 1.0},
      {"2000/s", 2000.0},
      // Spaces around the slash, as between a duration's number and unit ("10 s").
      {"5 / s", 5.0},
      {"5/ s", 5.0},
      {"5 /m", 5.0 / 60},
  };
  for (const auto& c : cases) {
    auto p = parse_rate(c.text);
    ASSERT_TRUE(ok(p)) << c.text << ": " << error_of(p);
    EXPECT_DOUBLE_EQ(std::get<Rate>(p).per_second, c.want) << c.text;
    EXPECT_EQ(std::get<Rate>(p).text, c.text);  // kept as written, for summaries
  }
}

TEST(ParseRate, RejectsBadText) {
  for (const char* text : {"", "10", "10/", "/s", "10/sec", "10/d", "10/ms", "10s/s", "-1/s",
                           "1e2/s", "ten/s", "10/s/s", "10/S"})
    EXPECT_FALSE(ok(parse_rate(text))) << "\"" << text << "\" was accepted";
  EXPECT_NE(error_of(parse_rate("0/s")).find("greater than zero"), std::string::npos);
  EXPECT_NE(error_of(parse_rate("0.0/m")).find("greater than zero"), std::string::npos);
}

// ---------------------------------------------------------------- endpoints

TEST(ParseEndpoint, HostAndPort) {
  struct Case {
    const char* text;
    const char* host;
    std::uint16_t port;
  } cases[] = {
      {"0.0.0.0:8080", "0.0.0.0", 8080},
      {"127.0.0.1:0", "127.0.0.1", 0},  // ephemeral, for tests
      {"localhost:6379", "localhost", 6379},
      {"redis.internal:65535", "redis.internal", 65535},
      {"[::]:8080", "::", 8080},
      {"[::1]:80", "::1", 80},
      {"[2001:db8::1]:443", "2001:db8::1", 443},
      {"[::ffff:10.0.0.1]:80", "::ffff:10.0.0.1", 80},
  };
  for (const auto& c : cases) {
    auto p = parse_endpoint(c.text);
    ASSERT_TRUE(ok(p)) << c.text << ": " << error_of(p);
    EXPECT_EQ(std::get<Endpoint>(p).host, c.host) << c.text;
    EXPECT_EQ(std::get<Endpoint>(p).port, c.port) << c.text;
  }
}

TEST(ParseEndpoint, RejectsBadForms) {
  for (const char* text :
       {"", "0.0.0.0", ":8080", "::1:8080",  // IPv6 needs brackets
        "[::1]", "[::1]:", "[::1]8080", "[::1", "[localhost]:80", "[1.2.3.4.5]:80",
        "host:", "host:http", "host:65536", "host:-1", "host:80x", "host: 80"})
    EXPECT_FALSE(ok(parse_endpoint(text))) << "\"" << text << "\" was accepted";
  EXPECT_NE(error_of(parse_endpoint("h:99999")).find("from 0 to 65535"), std::string::npos);
  EXPECT_NE(error_of(parse_endpoint("0.0.0.0")).find("HOST:PORT"), std::string::npos);
}

TEST(Endpoint, ToStringBracketsIpv6) {
  EXPECT_EQ((Endpoint{"::1", 80}).to_string(), "[::1]:80");
  EXPECT_EQ((Endpoint{"10.0.0.1", 6379}).to_string(), "10.0.0.1:6379");
  EXPECT_EQ((Endpoint{"localhost", 0}).to_string(), "localhost:0");
  // round trip
  auto p = parse_endpoint("[2001:db8::2]:9000");
  ASSERT_TRUE(ok(p));
  EXPECT_EQ(std::get<Endpoint>(p).to_string(), "[2001:db8::2]:9000");
}

// ---------------------------------------------------------------- IP addresses

TEST(ParseIp, Ipv4IsStoredMapped) {
  auto ip = parse_ip("192.0.2.7");
  ASSERT_TRUE(ip.has_value());
  EXPECT_TRUE(ip->is_v4());
  std::array<std::uint8_t, 16> want{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 7};
  EXPECT_EQ(ip->bytes, want);
  EXPECT_EQ(ip->to_string(), "192.0.2.7");
}

TEST(ParseIp, Ipv6) {
  auto ip = parse_ip("2001:db8::1");
  ASSERT_TRUE(ip.has_value());
  EXPECT_FALSE(ip->is_v4());
  EXPECT_EQ(ip->bytes[0], 0x20);
  EXPECT_EQ(ip->bytes[1], 0x01);
  EXPECT_EQ(ip->bytes[15], 0x01);
  EXPECT_EQ(ip->to_string(), "2001:db8::1");
  EXPECT_EQ(parse_ip("2001:DB8:0:0::1")->to_string(), "2001:db8::1");  // canonical form
  EXPECT_FALSE(parse_ip("::1")->is_v4());
  EXPECT_FALSE(parse_ip("::")->is_v4());
}

TEST(ParseIp, Ipv4MappedIpv6IsTheIpv4Address) {
  auto mapped = parse_ip("::ffff:10.1.2.3");
  auto plain = parse_ip("10.1.2.3");
  ASSERT_TRUE(mapped && plain);
  EXPECT_TRUE(mapped->is_v4());
  EXPECT_EQ(*mapped, *plain);
  EXPECT_EQ(mapped->to_string(), "10.1.2.3");
}

TEST(ParseIp, RejectsNonAddresses) {
  for (const char* text :
       {"", "1.2.3", "1.2.3.4.5", "256.0.0.1", "01.2.3.4", "1.2.3.4 ", " 1.2.3.4", "localhost",
        "[::1]", "fe80::1%eth0", "2001:db8::g", "1:2:3:4:5:6:7:8:9", "1.2.3.4/32",
        "::1:", "0000:0000:0000:0000:0000:0000:0000:0000:0"})
    EXPECT_FALSE(parse_ip(text).has_value()) << "\"" << text << "\" was accepted";
}

TEST(ParseIp, RejectsEmbeddedNul) {
  // The text is a string_view: a NUL inside it must not truncate what is validated.
  EXPECT_FALSE(parse_ip(std::string_view("1.2.3.4\0junk", 12)).has_value());
  EXPECT_FALSE(ok(parse_cidr(std::string_view("10.0.0.0\0/8", 11))));
}

TEST(ParseIp, RejectsOverlongText) {
  EXPECT_FALSE(parse_ip(std::string(100, '1')).has_value());
  EXPECT_FALSE(parse_ip("0000:0000:0000:0000:0000:ffff:255.255.255.255x").has_value());
}

// ---------------------------------------------------------------- CIDR ranges

IpAddress ip(const char* text) {
  auto a = parse_ip(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(IpAddress{});
}

Cidr cidr(const char* text) {
  auto p = parse_cidr(text);
  EXPECT_TRUE(ok(p)) << text << ": " << error_of(p);
  return ok(p) ? std::get<Cidr>(p) : Cidr{};
}

TEST(ParseCidr, Ipv4PrefixIsCountedOnThe128BitForm) {
  auto c = cidr("10.0.0.0/8");
  EXPECT_EQ(c.prefix, 96 + 8);
  EXPECT_EQ(c.to_string(), "10.0.0.0/8");
  EXPECT_EQ(cidr("127.0.0.1/32").prefix, 128);
  EXPECT_EQ(cidr("0.0.0.0/0").prefix, 96);
}

TEST(ParseCidr, HostBitsAreCleared) {
  EXPECT_EQ(cidr("10.1.2.3/8").to_string(), "10.0.0.0/8");
  EXPECT_EQ(cidr("192.168.77.200/20").to_string(), "192.168.64.0/20");
  EXPECT_EQ(cidr("2001:db8:abcd::1/32").to_string(), "2001:db8::/32");
  EXPECT_EQ(cidr("2001:db8::ffff/127").to_string(), "2001:db8::fffe/127");
}

TEST(ParseCidr, BareAddressIsAHostRoute) {
  auto v4 = cidr("192.0.2.1");
  EXPECT_EQ(v4.prefix, 128);
  EXPECT_EQ(v4.to_string(), "192.0.2.1/32");
  EXPECT_TRUE(v4.contains(ip("192.0.2.1")));
  EXPECT_FALSE(v4.contains(ip("192.0.2.2")));
  auto v6 = cidr("2001:db8::1");
  EXPECT_EQ(v6.prefix, 128);
  EXPECT_EQ(v6.to_string(), "2001:db8::1/128");
  EXPECT_TRUE(v6.contains(ip("2001:db8::1")));
  EXPECT_FALSE(v6.contains(ip("2001:db8::2")));
}

TEST(ParseCidr, RejectsBadPrefixes) {
  for (const char* text :
       {"10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/", "10.0.0.0/8x", "10.0.0.0/ 8", "10.0.0.0/8/8",
        "::/129", "2001:db8::/", "/8", "", "300.0.0.0/8", "host/8", "10.0.0.0/+8"})
    EXPECT_FALSE(ok(parse_cidr(text))) << "\"" << text << "\" was accepted";
  EXPECT_NE(error_of(parse_cidr("10.0.0.0/33")).find("0 to 32"), std::string::npos);
  EXPECT_NE(error_of(parse_cidr("::/129")).find("0 to 128"), std::string::npos);
}

TEST(CidrContains, Ipv4) {
  auto c = cidr("10.0.0.0/8");
  EXPECT_TRUE(c.contains(ip("10.0.0.0")));
  EXPECT_TRUE(c.contains(ip("10.255.255.255")));
  EXPECT_FALSE(c.contains(ip("11.0.0.0")));
  EXPECT_FALSE(c.contains(ip("9.255.255.255")));
  EXPECT_TRUE(c.contains(ip("::ffff:10.9.8.7")));  // mapped form is the same address
  EXPECT_FALSE(c.contains(ip("::a09:807")));       // ::10.9.8.7 (compatible, not mapped)

  auto odd = cidr("192.168.64.0/20");  // a prefix that is not a whole number of bytes
  EXPECT_TRUE(odd.contains(ip("192.168.64.1")));
  EXPECT_TRUE(odd.contains(ip("192.168.79.255")));
  EXPECT_FALSE(odd.contains(ip("192.168.80.0")));
  EXPECT_FALSE(odd.contains(ip("192.168.63.255")));

  auto one = cidr("203.0.113.7/31");
  EXPECT_TRUE(one.contains(ip("203.0.113.6")));
  EXPECT_TRUE(one.contains(ip("203.0.113.7")));
  EXPECT_FALSE(one.contains(ip("203.0.113.8")));
}

TEST(CidrContains, Ipv4AnyMatchesOnlyIpv4) {
  auto any4 = cidr("0.0.0.0/0");
  EXPECT_TRUE(any4.contains(ip("1.2.3.4")));
  EXPECT_TRUE(any4.contains(ip("255.255.255.255")));
  EXPECT_FALSE(any4.contains(ip("2001:db8::1")));
  EXPECT_FALSE(any4.contains(ip("::1")));
}

TEST(CidrContains, Ipv6) {
  auto c = cidr("2001:db8::/32");
  EXPECT_TRUE(c.contains(ip("2001:db8::1")));
  EXPECT_TRUE(c.contains(ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
  EXPECT_FALSE(c.contains(ip("2001:db9::")));
  EXPECT_FALSE(c.contains(ip("10.0.0.1")));

  auto c56 = cidr("2001:db8:aa:bb00::/56");
  EXPECT_TRUE(c56.contains(ip("2001:db8:aa:bbff::1")));
  EXPECT_FALSE(c56.contains(ip("2001:db8:aa:bc00::1")));

  auto c65 = cidr("2001:db8::/65");  // bit 65 is the top bit of byte 8
  EXPECT_TRUE(c65.contains(ip("2001:db8::7fff:ffff:ffff:ffff")));
  EXPECT_FALSE(c65.contains(ip("2001:db8::8000:0:0:0")));

  auto loopback = cidr("::1/128");
  EXPECT_TRUE(loopback.contains(ip("::1")));
  EXPECT_FALSE(loopback.contains(ip("::2")));
  EXPECT_FALSE(loopback.contains(ip("127.0.0.1")));
}

TEST(CidrContains, Ipv6AnyMatchesEverything) {
  auto any = cidr("::/0");
  EXPECT_EQ(any.prefix, 0);
  EXPECT_TRUE(any.contains(ip("2001:db8::1")));
  EXPECT_TRUE(any.contains(ip("::")));
  EXPECT_TRUE(any.contains(ip("1.2.3.4")));  // IPv4 lives inside ::ffff:0:0/96
}

TEST(CidrContains, Ipv4MappedCidrIsAnIpv4Range) {
  // "::ffff:10.0.0.0/8" is read as the IPv4 address 10.0.0.0 with an IPv4 prefix length.
  auto c = cidr("::ffff:10.0.0.0/8");
  EXPECT_EQ(c.prefix, 96 + 8);
  EXPECT_TRUE(c.contains(ip("10.20.30.40")));
  EXPECT_FALSE(c.contains(ip("11.0.0.1")));
}

}  // namespace
