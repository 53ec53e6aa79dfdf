// TLS ClientHello fingerprints: JA4 and JA3 of real browsers' ClientHellos (captures from
// FoxIO-LLC/ja4's test pcaps, with the JA4 its reference implementation gives; JA3 as
// salesforce/ja3 defines it), and the rules both share: GREASE left out, JA4 blind to the
// order of ciphers and extensions, JA3 not.
#include <gtest/gtest.h>

#include <string>

#include "floodgate/tls/fingerprint.hpp"

namespace floodgate::tls {
namespace {

// A handshake message from hex, then `zeros` zero bytes (the padding extension's contents).
std::string message(const std::string& hex, std::size_t zeros) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out + std::string(zeros, '\0');
}

// Firefox (no GREASE): its delegated_credentials extension (0x0022) carries a list of
// signature algorithms of its own, which JA4 must not read.
const std::string kFirefox = message(
    "010001fc0303ecb2691addb2bf6c599c7aaae23de5f42561cc04eb41029acc6fc050a16ac1d22046f8617b58"
    "0ac9358e2aa44e306d52466bcc989c87c8ca64309f5faf50ba7b4d0022130113031302c02bc02fcca9cca8c0"
    "2cc030c00ac009c013c014009c009d002f00350100019100000021001f00001c636f6e74696c652e73657276"
    "696365732e6d6f7a696c6c612e636f6d00170000ff01000100000a000e000c001d0017001800190100010100"
    "0b00020100002300000010000e000c02683208687474702f312e310005000501000000000022000a00080403"
    "0503060302030033006b0069001d00208909858fbeb6ed2f1248ba5b9e2978bead0e840110192c61daed0096"
    "798b184400170041044d183d91f5eed35791fa982464e3b0214aaa5f5d1b78616d9b9fbebc22d11f535b2f94"
    "c686143136aa795e6e5a875d6c08064ad5b76d44caad766e2483012748002b00050403040303000d00180016"
    "04030503060308040805080604010501060102030201002d00020101001c000240010015007a",
    122);

// Chrome, with GREASE among its ciphers, extensions, versions and groups: the JA4 the
// specification uses as its example.
const std::string kChrome = message(
    "010001fc03030f9e38acb9a54a7c6e00e29a70ac2feee180ff76d7f25dca84932a66a42d1e5a20bc58b92f86"
    "5e6b9aa4a6371cadcb0afe1da1c0f705209a11d52357f56d5dd9620020aaaa130113021303c02bc02fc02cc0"
    "30cca9cca8c013c014009c009d002f0035010001939a9a0000ff010001000033002b00290a0a000100001d00"
    "20cf55af2603e92f59eb321779706a18fa6b96b16c16404c2264ed687a59401878002d000201010005000501"
    "00000000446900050003026832000d00120010040308040401050308050501080606010010000e000c026832"
    "08687474702f312e3100230000001b0003020002002b0007060a0a0304030300000022002000001d636c6965"
    "6e7473657276696365732e676f6f676c65617069732e636f6d00120000000a000a00080a0a001d0017001800"
    "170000000b000201006a6a000100001500ba",
    186);

TEST(Fingerprint, FirefoxsClientHello) {
  auto hello = parse_client_hello(kFirefox);
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->legacy_version, 0x0303);
  EXPECT_EQ(hello->ciphers.size(), 17u);
  EXPECT_EQ(hello->extensions.size(), 15u);
  EXPECT_EQ(hello->first_alpn, "h2");
  const auto f = fingerprints_of(*hello);
  EXPECT_EQ(f.ja4, "t13d1715h2_5b57614c22b0_3d5424432f57");
  EXPECT_EQ(f.ja3, "579ccef312d18482fc42e2b822ca2430");
}

TEST(Fingerprint, ChromesClientHelloWithGrease) {
  auto hello = parse_client_hello(kChrome);
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->ciphers.front(), 0xaaaa) << "GREASE is read, then left out";
  const auto f = fingerprints_of(*hello);
  EXPECT_EQ(f.ja4, "t13d1516h2_8daaf6152771_e5627efa2ab1");
  EXPECT_EQ(f.ja3, "1c258ebef8eee2dfa3df6d8d07285af9");
}

// Chrome shuffles its extensions per connection: JA4 sorts them, JA3 does not.
TEST(Fingerprint, Ja4IgnoresTheOrderOfExtensionsAndCiphersJa3DoesNot) {
  auto hello = *parse_client_hello(kChrome);
  const auto before = fingerprints_of(hello);
  std::swap(hello.extensions[1], hello.extensions[5]);
  std::swap(hello.ciphers[2], hello.ciphers[7]);
  const auto after = fingerprints_of(hello);
  EXPECT_EQ(after.ja4, before.ja4);
  EXPECT_NE(after.ja3, before.ja3);
  // Other GREASE values (another connection's) change nothing.
  auto regreased = *parse_client_hello(kChrome);
  for (auto* list : {&regreased.ciphers, &regreased.extensions, &regreased.supported_versions,
                     &regreased.groups})
    for (auto& v : *list)
      if ((v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff)) v = 0x5a5a;
  EXPECT_EQ(fingerprints_of(regreased).ja4, before.ja4);
  EXPECT_EQ(fingerprints_of(regreased).ja3, before.ja3);
}

TEST(Fingerprint, AlpnSniAndVersionParts) {
  auto hello = *parse_client_hello(kChrome);
  auto part_a = [&] { return fingerprints_of(hello).ja4.substr(0, 10); };
  hello.first_alpn = "http/1.1";
  EXPECT_EQ(part_a(), "t13d1516h1");
  hello.first_alpn = "h";
  EXPECT_EQ(part_a(), "t13d1516hh");
  hello.first_alpn = "\xba\xad";  // not alphanumeric: the first and last hex digits
  EXPECT_EQ(part_a(), "t13d1516bd");
  hello.first_alpn.clear();
  EXPECT_EQ(part_a(), "t13d151600");
  hello.supported_versions.clear();  // no supported_versions: the legacy version
  EXPECT_EQ(part_a(), "t12d151600");
  std::erase(hello.extensions, 0x0000);  // no SNI
  EXPECT_EQ(part_a(), "t12i151500");
}

TEST(Fingerprint, AnEmptyOrBrokenHelloIsNotRead) {
  EXPECT_FALSE(parse_client_hello(""));
  EXPECT_FALSE(parse_client_hello(std::string("\x02\x00\x00\x00", 4)));  // not a ClientHello
  EXPECT_FALSE(parse_client_hello(kChrome.substr(0, 40)));               // cut in the random
  EXPECT_FALSE(parse_client_hello(kChrome.substr(0, 200)));              // shorter than it says
  // No ciphers and no extensions: the hashes' zero forms.
  ClientHello bare;
  bare.legacy_version = 0x0301;
  EXPECT_EQ(fingerprints_of(bare).ja4, "t10i000000_000000000000_000000000000");
  EXPECT_EQ(fingerprints_of(bare).ja3.size(), 32u);
}

}  // namespace
}  // namespace floodgate::tls
