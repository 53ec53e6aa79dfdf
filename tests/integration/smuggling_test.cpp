// Request smuggling, as a matrix: raw bytes written to a real proxy socket, and for each
// case exactly what the client gets back and exactly which requests the real origin saw
// (its /__stats, reset before every case). The rule throughout: the origin sees the
// requests the client meant, or none; a request whose framing is in doubt is refused (400,
// or for a body found broken after the header was accepted: the connection is closed) and
// nothing after it on the connection is read as a request.
//
// The expectations cite RFC 9112 (HTTP/1.1) and RFC 9110 (semantics):
//   9112 2.2  bare CR must be rejected (or replaced by SP); bare LF may be accepted as a line
//             end; whitespace before the first field line: reject or ignore that line.
//   9112 3.2  Host: 400 if missing in HTTP/1.1, repeated, or invalid; 3.2.2: an
//             absolute-form target's authority replaces Host.
//   9112 5.1  no whitespace between field name and colon: 400.
//   9112 5.2  obs-fold: 400, or replace each fold by SP before interpreting the value.
//   9112 6.1  chunked must be final and applied once; a coding not understood: 501 (here 400,
//             also a refusal); Transfer-Encoding in HTTP/1.0: faulty framing, close.
//   9112 6.3  Transfer-Encoding with Content-Length: handle as an error (here 400);
//             Transfer-Encoding not ending in chunked: 400 and close; invalid
//             Content-Length: 400 and close.
//   9112 7.1  chunk-size is 1*HEXDIG, overflow must be prevented; 7.1.1 unknown chunk
//             extensions are ignored; 7.1.2 trailers never carry framing.
//   9112 9.3.2 pipelined requests are answered in order.
//   9110 5.5  CR, LF, NUL in a field value: reject (or replace by SP); other controls are not
//             field-vchar either. 9110 8.6: a list of identical Content-Length values may be
//             accepted as one.
#include <poll.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <memory>

#include "harness.hpp"

namespace floodgate::testing {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;  // "...\0..."s keeps its NUL bytes

// Every case ends well inside this: the proxy closes at once after a refusal, after its
// 500 ms header_read/idle timeouts when it is left waiting, and right after our half-close
// when it keeps the connection.
constexpr auto kCaseDeadline = 2s;

std::uint64_t fnv(std::string_view data) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return h;
}

// What the origin's /echo says about a body it received.
std::vector<std::string> echoed_body(std::string_view body) {
  return {"\"body_bytes\":" + std::to_string(body.size()) + ",",
          "\"body_fnv\":\"" + std::to_string(fnv(body)) + "\""};
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::string kSmuggled = "GET /echo/smuggled HTTP/1.1\r\nHost: t\r\n\r\n";
const std::string kChunkedHello = "5\r\nhello\r\n0\r\n\r\n";

std::string post(std::string_view headers, std::string_view body,
                 std::string_view target = "/echo") {
  return "POST " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n" + std::string(headers) +
         "\r\n" + std::string(body);
}

// A chunked POST whose Transfer-Encoding line is `te` (without CRLF), with a smuggled
// request after its body: if the proxy misreads the framing, the smuggled one shows.
std::string te_post(std::string_view te, std::string_view body = kChunkedHello) {
  return post(std::string(te) + "\r\n", std::string(body) + kSmuggled);
}

std::string get_with(std::string_view headers, std::string_view target = "/echo/h") {
  return "GET " + std::string(target) + " HTTP/1.1\r\n" + std::string(headers) + "\r\n";
}

struct Reply {
  int status;
  std::vector<std::string> has = {};    // substrings of its body (the origin's echo JSON)
  std::vector<std::string> lacks = {};  // and what must not be in it
};

enum class After {
  kept,   // the proxy keeps the connection: the test half-closes it, the proxy then ends it
  closed  // the proxy closes it by itself, with nothing more than `replies`
};

struct Case {
  std::string name;
  std::string raw;             // written in one go
  std::vector<Reply> replies;  // what the client gets, in order (empty: nothing at all)
  After after;
  std::vector<std::string> seen;  // exactly the requests the origin got ("METHOD target")
};

Case refused(std::string name, std::string raw, int status = 400) {
  return {std::move(name), std::move(raw), {{status}}, After::closed, {}};
}
// The header was accepted, the body turned out broken: nothing has reached the origin, the
// client gets 400 (413 for a body over the limit) and the connection closes.
Case cut_off(std::string name, std::string raw) {
  return {std::move(name), std::move(raw), {{400}}, After::closed, {}};
}
// A te_post() with a chunked body "hello" the proxy accepts: forwarded, re-framed, intact,
// and the GET after it is then a request of its own, forwarded after the POST.
Case chunked_hello(std::string name, std::string raw) {
  return {std::move(name),
          std::move(raw),
          {{200, echoed_body("hello")}, {200, {R"("target":"/echo/smuggled")"}}},
          After::kept,
          {"POST /echo", "GET /echo/smuggled"}};
}

std::string hex(std::size_t n) {
  char b[20];
  std::snprintf(b, sizeof b, "%zx", n);
  return b;
}

std::vector<Case> cases() {
  const std::string smuggled_len = std::to_string(kSmuggled.size());
  return {
      // Baselines: the matrix means something only if good requests pass.
      {"plain_get",
       get_with("Host: t\r\n", "/echo/plain"),
       {{200}},
       After::kept,
       {"GET /echo/plain"}},
      // The trailing "smuggled" GET of te_post() is a legitimate pipelined request when the
      // body is framed right: the origin must see it *after* the POST, as its own request.
      chunked_hello("chunked_baseline", te_post("Transfer-Encoding: chunked")),

      // CL.TE and TE.CL in both orders (9112 6.3).
      refused("cl_te",
              post("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n" + kSmuggled)),
      refused("te_cl", post("Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
                            "5c\r\n" + kSmuggled + "\r\n0\r\n\r\n")),
      refused("cl_te_obfuscated_case",
              post("Content-Length: 5\r\nTransfer-Encoding: CHUNKED\r\n", kChunkedHello)),
      refused(
          "te_gzip_then_cl",
          post("Transfer-Encoding: gzip\r\nContent-Length: " + smuggled_len + "\r\n", kSmuggled)),
      refused(
          "cl_then_te_gzip",
          post("Content-Length: " + smuggled_len + "\r\nTransfer-Encoding: gzip\r\n", kSmuggled)),
      // Content-Length itself (9112 6.3, 9110 8.6).
      refused("cl_conflicting",
              post("Content-Length: 5\r\nContent-Length: 45\r\n", "hello" + kSmuggled)),
      refused("cl_list_conflicting", post("Content-Length: 5, 45\r\n", "hello" + kSmuggled)),
      {"cl_list_identical",
       post("Content-Length: 5, 5\r\n", "hello"),
       {{200, echoed_body("hello")}},
       After::kept,
       {"POST /echo"}},
      {"cl_repeated_identical",
       post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
       {{200, echoed_body("hello")}},
       After::kept,
       {"POST /echo"}},
      refused("cl_plus_sign", post("Content-Length: +5\r\n", "hello" + kSmuggled)),
      refused("cl_negative", post("Content-Length: -1\r\n", "hello" + kSmuggled)),
      refused("cl_hex", post("Content-Length: 0x5\r\n", "hello" + kSmuggled)),
      refused("cl_overflowing_2_64", post("Content-Length: 18446744073709551621\r\n", "hello")),
      refused("cl_space_before_colon", post("Content-Length : 5\r\n", "hello" + kSmuggled)),
      refused("cl_vertical_tab", post("Content-Length: 5\x0b\r\n", "hello" + kSmuggled)),
      {"cl_ows_around_value",
       post("Content-Length: \t5 \t\r\n", "hello"),
       {{200, echoed_body("hello")}},
       After::kept,
       {"POST /echo"}},

      // Obfuscated Transfer-Encoding. Coding names are case-insensitive and OWS around a
      // value is not part of it, so these are plain chunked (and re-framed by the proxy).
      chunked_hello("te_capitalized", te_post("Transfer-Encoding: Chunked")),
      chunked_hello("te_upper_case", te_post("Transfer-Encoding: CHUNKED")),
      chunked_hello("te_lower_case_name", te_post("transfer-encoding: chunked")),
      chunked_hello("te_spaces_around_value", te_post("Transfer-Encoding:    chunked   ")),
      chunked_hello("te_tabs_around_value", te_post("Transfer-Encoding:\t\tchunked\t")),
      // ...and these are not: refused before anything is forwarded.
      refused("te_space_before_colon", te_post("Transfer-Encoding : chunked")),
      refused("te_tab_before_colon", te_post("Transfer-Encoding\t: chunked")),
      refused("te_duplicate_headers",
              te_post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked")),
      refused("te_gzip_then_chunked_headers",
              te_post("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked")),
      refused("te_chunked_then_identity_headers",
              te_post("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity")),
      refused("te_chunked_identity", te_post("Transfer-Encoding: chunked, identity")),
      refused("te_identity_chunked", te_post("Transfer-Encoding: identity, chunked")),
      refused("te_gzip_chunked", te_post("Transfer-Encoding: gzip, chunked")),
      refused("te_chunked_chunked", te_post("Transfer-Encoding: chunked, chunked")),
      refused("te_gzip_only", te_post("Transfer-Encoding: gzip", kSmuggled)),
      refused("te_xchunked", te_post("Transfer-Encoding: xchunked")),
      refused("te_quoted", te_post("Transfer-Encoding: \"chunked\"")),
      refused("te_vertical_tab_after", te_post("Transfer-Encoding: chunked\x0b")),
      refused("te_vertical_tab_before", te_post("Transfer-Encoding: \x0b chunked")),
      refused("te_form_feed_after", te_post("Transfer-Encoding: chunked\x0c")),
      refused("te_form_feed_before", te_post("Transfer-Encoding:\x0c chunked")),
      refused("te_in_http_1_0",
              "POST /echo HTTP/1.0\r\nHost: t\r\nTransfer-Encoding: "
              "chunked\r\n\r\n" +
                  kChunkedHello + kSmuggled),

      // Chunk sizes (9112 7.1). The header is fine, so the proxy is already committed to
      // this request when the size turns out bad: it closes without forwarding a byte.
      cut_off("chunk_size_not_hex",
              te_post("Transfer-Encoding: chunked", "zz\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_size_negative",
              te_post("Transfer-Encoding: chunked", "-5\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_size_overflowing_2_64",
              te_post("Transfer-Encoding: chunked", "10000000000000005\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_size_missing",
              te_post("Transfer-Encoding: chunked", "\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_size_trailing_garbage",
              te_post("Transfer-Encoding: chunked", "5x\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_size_space_garbage",
              te_post("Transfer-Encoding: chunked", "5 x\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_size_0x_prefix",
              te_post("Transfer-Encoding: chunked", "0x5\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_data_longer_than_size",
              te_post("Transfer-Encoding: chunked", "3\r\nhello\r\n0\r\n\r\n")),
      // 2^64 - 1 parses, and is over max_body_bytes (1 MiB): that one can be answered.
      refused("chunk_size_2_64_minus_1_over_limit",
              te_post("Transfer-Encoding: chunked", "ffffffffffffffff\r\nhello\r\n0\r\n\r\n"), 413),
      chunked_hello("chunk_size_leading_zeros",
                    te_post("Transfer-Encoding: chunked", "0005\r\nhello\r\n0\r\n\r\n")),

      // Chunk extensions (9112 7.1.1): well-formed ones are ignored, the body arrives intact.
      chunked_hello("chunk_ext_token",
                    te_post("Transfer-Encoding: chunked", "5;a=b\r\nhello\r\n0;last=1\r\n\r\n")),
      chunked_hello("chunk_ext_quoted", te_post("Transfer-Encoding: chunked",
                                                "5;a=\"x;y \\\" z\"\r\nhello\r\n0\r\n\r\n")),
      chunked_hello("chunk_ext_name_only_and_bws",
                    te_post("Transfer-Encoding: chunked", "5 ; a ; b = c\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_ext_empty_name",
              te_post("Transfer-Encoding: chunked", "5;\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_ext_no_name",
              te_post("Transfer-Encoding: chunked", "5;=b\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_ext_empty_value",
              te_post("Transfer-Encoding: chunked", "5;a=\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_ext_space_in_value",
              te_post("Transfer-Encoding: chunked", "5;a=b c\r\nhello\r\n0\r\n\r\n")),
      cut_off("chunk_ext_quote_over_line_end",
              te_post("Transfer-Encoding: chunked", "5;a=\"b\r\nhe\"llo\r\n0\r\n\r\n")),
      // Trailers (9112 7.1.2): dropped on the way, and framing fields in them are refused.
      chunked_hello("chunk_trailer_dropped", te_post("Transfer-Encoding: chunked",
                                                     "5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n")),
      cut_off(
          "chunk_trailer_content_length",
          te_post("Transfer-Encoding: chunked", "5\r\nhello\r\n0\r\nContent-Length: 41\r\n\r\n")),
      cut_off("chunk_trailer_transfer_encoding",
              te_post("Transfer-Encoding: chunked",
                      "5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n")),

      // Bare LF (9112 2.2: may be accepted as a line end; floodgate does not). A line ended
      // by LF where CRLF is due is refused, the request line included: it is parsed as soon
      // as it has arrived, so a head in LF only is refused too, not waited for.
      refused("bare_lf_request_line", "GET /echo/lf HTTP/1.1\nHost: t\r\n\r\n"),
      refused("bare_lf_in_header", "GET /echo/lf HTTP/1.1\r\nHost: t\nX-A: 1\r\n\r\n"),
      refused("bare_lf_header_injects_te",
              post("X-A: 1\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n", "hello")),
      refused("bare_lf_everywhere", "GET /echo/lf HTTP/1.1\nHost: t\n\n" + kSmuggled),
      cut_off("bare_lf_chunk_size_line",
              te_post("Transfer-Encoding: chunked", "5\nhello\r\n0\r\n\r\n")),
      cut_off("bare_lf_after_chunk_data",
              te_post("Transfer-Encoding: chunked", "5\r\nhello\n0\r\n\r\n")),
      // Chunk framing all in LF: never a complete chunk line, so the proxy waits (idle,
      // 500 ms here) and closes; the origin gets nothing.
      Case{"bare_lf_chunked_body",
           post("Transfer-Encoding: chunked\r\n", "5\nhello\n0\n\n"),
           {},
           After::closed,
           {}},
      // With a CRLF request behind it, the first "line" ends there and is not a chunk size.
      cut_off("bare_lf_chunked_body_then_crlf",
              te_post("Transfer-Encoding: chunked", "5\nhello\n0\n\n")),
      // Bare CR (9112 2.2: must be rejected or replaced).
      refused("bare_cr_in_header_value",
              get_with("Host: t\r\nX-A: a\rTransfer-Encoding: chunked\r\n")),
      refused("bare_cr_in_request_line", "GET /echo/cr\r HTTP/1.1\r\nHost: t\r\n\r\n"),
      refused("bare_cr_ends_header", get_with("Host: t\rX-A: b\r\n")),

      // obs-fold (9112 5.2): replaced by SP. The folded text stays inside the value it
      // continues; it never becomes a header of its own.
      {"obs_fold_space",
       get_with("Host: t\r\nX-Folded: a\r\n b\r\n"),
       {{200, {R"(["X-Folded","a b"])"}}},
       After::kept,
       {"GET /echo/h"}},
      {"obs_fold_tab_hides_host",
       get_with("Host: t\r\nX-Folded: a\r\n\tHost: evil\r\n"),
       {{200, {R"(["X-Folded","a Host: evil"])", R"(["Host","t"])"}, {R"(["Host","evil"])"}}},
       After::kept,
       {"GET /echo/h"}},
      {"obs_fold_hides_te",
       post("X-Folded: a\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "hello"),
       {{200,
         plus(echoed_body("hello"), {R"(["X-Folded","a Transfer-Encoding: chunked"])"}),
         {R"(["Transfer-Encoding")"}}},
       After::kept,
       {"POST /echo"}},
      // Folded into a Transfer-Encoding value: judged after unfolding.
      chunked_hello("obs_fold_te_value_on_next_line", te_post("Transfer-Encoding:\r\n chunked")),
      refused("obs_fold_te_gzip_chunked", te_post("Transfer-Encoding: gzip,\r\n chunked")),
      // Whitespace before the first field line (9112 2.2): refused.
      refused("space_before_first_header", "GET /echo/h HTTP/1.1\r\n X-A: 1\r\nHost: t\r\n\r\n"),

      // Control bytes (9110 5.5, 5.1: a field name is a token).
      refused("nul_in_header_value", get_with("Host: t\r\nX-A: a\0b\r\n"s)),
      refused("nul_in_header_name", get_with("Host: t\r\nX-\0A: b\r\n"s)),
      refused("cr_in_header_name", get_with("Host: t\r\nX-\rA: b\r\n")),
      refused("escape_in_header_value", get_with("Host: t\r\nX-A: a\x1b[0mb\r\n")),
      refused("del_in_header_value", get_with("Host: t\r\nX-A: a\x7f\r\n")),
      refused("control_in_header_name", get_with("Host: t\r\nX-\x01: b\r\n")),
      refused("empty_header_name", get_with("Host: t\r\n: b\r\n")),
      refused("nul_in_target", "GET /echo/\0x HTTP/1.1\r\nHost: t\r\n\r\n"s),
      // ...while HTAB and obs-text are legal in a value and pass through untouched.
      {"tab_and_obs_text_in_value",
       get_with("Host: t\r\nX-A: a\tcaf\xc3\xa9\r\n"),
       {{200, {"[\"X-A\",\"a\\u0009caf\xc3\xa9\"]"}}},
       After::kept,
       {"GET /echo/h"}},

      // Host (9112 3.2).
      refused("host_duplicate", get_with("Host: a\r\nHost: b\r\n")),
      refused("host_duplicate_identical", get_with("Host: t\r\nHost: t\r\n")),
      refused("host_missing_http_1_1", get_with("X-A: 1\r\n")),
      // What goes upstream is HTTP/1.1, which must carry a Host: the upstream's authority.
      {"host_missing_http_1_0",
       "GET /echo/h10 HTTP/1.0\r\n\r\n",
       {{200, {R"(["Host","127.0.0.1:)"}}},
       After::closed,
       {"GET /echo/h10"}},
      // A Host that is not a valid authority: 400 (9112 3.2).
      refused("host_with_space", get_with("Host: a b\r\n")),
      refused("host_with_path_and_userinfo", get_with("Host: a/b@c\r\n")),
      refused("host_port_not_numeric", get_with("Host: t:80x\r\n")),
      refused("host_ipv6_unbracketed", get_with("Host: ::1\r\n")),
      {"host_ipv6_literal_with_port",
       get_with("Host: [::1]:8080\r\n"),
       {{200, {R"(["Host","[::1]:8080"])"}}},
       After::kept,
       {"GET /echo/h"}},

      // Absolute-form (9112 3.2.2): forwarded in origin-form, the authority as Host.
      {"absolute_form",
       "GET http://origin.test/echo/abs?q=1 HTTP/1.1\r\nHost: origin.test\r\n\r\n",
       {{200, {R"("target":"/echo/abs?q=1")", R"(["Host","origin.test"])"}}},
       After::kept,
       {"GET /echo/abs?q=1"}},
      {"absolute_form_other_host",
       "GET http://origin.test:8080/echo/abs HTTP/1.1\r\nHost: other.test\r\n\r\n",
       {{200, {R"("target":"/echo/abs")", R"(["Host","origin.test:8080"])"}, {"other.test"}}},
       After::kept,
       {"GET /echo/abs"}},
      refused("absolute_form_without_host", "GET http://origin.test/echo/abs HTTP/1.1\r\n\r\n"),
      refused("absolute_form_userinfo",
              "GET http://user@origin.test/echo/abs HTTP/1.1\r\nHost: origin.test\r\n\r\n"),
      refused("absolute_form_other_scheme",
              "GET ftp://origin.test/echo/abs HTTP/1.1\r\nHost: origin.test\r\n\r\n"),
      refused("authority_form", "CONNECT origin.test:80 HTTP/1.1\r\nHost: origin.test\r\n\r\n"),

      // Pipelining (9112 9.3.2): everything forwarded, in order, answers in order...
      {"pipelined_two",
       get_with("Host: t\r\n", "/echo/p1") + get_with("Host: t\r\n", "/echo/p2"),
       {{200, {R"("target":"/echo/p1")"}}, {200, {R"("target":"/echo/p2")"}}},
       After::kept,
       {"GET /echo/p1", "GET /echo/p2"}},
      {"pipelined_three_with_bodies",
       get_with("Host: t\r\n", "/echo/p1") + post("Content-Length: 5\r\n", "hello", "/echo/p2") +
           post("Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n\r\n", "/echo/p3"),
       {{200, {R"("target":"/echo/p1")"}},
        {200, plus({R"("target":"/echo/p2")"}, echoed_body("hello"))},
        {200, plus({R"("target":"/echo/p3")"}, echoed_body("abc"))}},
       After::kept,
       {"GET /echo/p1", "POST /echo/p2", "POST /echo/p3"}},
      // ...but nothing after a refused request is read as a request.
      refused("pipelined_after_refused",
              get_with("Host: a\r\nHost: b\r\n", "/echo/p1") + get_with("Host: t\r\n", "/echo/p2")),
      {"pipelined_good_refused_good",
       get_with("Host: t\r\n", "/echo/p1") + get_with("Host: t\r\nX-A: a\0b\r\n"s, "/echo/p2") +
           get_with("Host: t\r\n", "/echo/p3"),
       {{200, {R"("target":"/echo/p1")"}}, {400}},
       After::closed,
       {"GET /echo/p1"}},
      {"pipelined_after_connection_close",
       get_with("Host: t\r\nConnection: close\r\n", "/echo/p1") +
           get_with("Host: t\r\n", "/echo/p2"),
       {{200, {R"("target":"/echo/p1")"}}},
       After::closed,
       {"GET /echo/p1"}},
      {"pipelined_after_http_1_0",
       "GET /echo/p1 HTTP/1.0\r\n\r\n" + get_with("Host: t\r\n", "/echo/p2"),
       {{200, {R"("target":"/echo/p1")"}}},
       After::closed,
       {"GET /echo/p1"}},

      // A request hidden in a body stays body: the origin gets its bytes as the body of the
      // one request the client sent.
      {"request_in_content_length_body",
       post("Content-Length: " + smuggled_len + "\r\n", kSmuggled),
       {{200, echoed_body(kSmuggled)}},
       After::kept,
       {"POST /echo"}},
      {"request_in_get_body",
       get_with("Host: t\r\nContent-Length: " + smuggled_len + "\r\n", "/echo/get-body") +
           kSmuggled,
       {{200, echoed_body(kSmuggled)}},
       After::kept,
       {"GET /echo/get-body"}},
      {"request_in_chunked_body",
       post("Transfer-Encoding: chunked\r\n",
            hex(kSmuggled.size()) + "\r\n" + kSmuggled + "\r\n0\r\n\r\n"),
       {{200, echoed_body(kSmuggled)}},
       After::kept,
       {"POST /echo"}},
  };
}

// ---------------------------------------------------------------------------------------

std::string proxy_config(const Origin& origin) {
  return one_route_config(origin,
                          "  threads: 1\n  pop: itest\n  max_body_bytes: 1MiB\n"
                          "  timeouts: { header_read: 500ms, idle: 500ms }\n",
                          "response_timeout: 2s");
}

// Reads until the peer closes or the deadline passes; `closed` tells which.
struct Received {
  std::string bytes;
  bool closed = false;
};

Received read_until_closed(int fd, std::chrono::milliseconds timeout) {
  Received r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return r;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return r;
    auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      r.bytes.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno == ECONNRESET) {
      r.closed = true;
      return r;
    } else if (errno != EAGAIN && errno != EINTR) {
      return r;
    }
  }
}

// Splits what arrived into responses; `rest` keeps anything that is not a whole one.
std::vector<Response> parse_responses(std::string_view bytes, std::string& rest) {
  std::vector<Response> out;
  while (!bytes.empty()) {
    bhttp::response_parser<bhttp::string_body> p;
    p.eager(true);
    p.body_limit(boost::none);
    beast::error_code ec;
    std::size_t used = 0;
    while (!p.is_done() && used < bytes.size()) {
      auto n = p.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
      used += n;
      if (ec == bhttp::error::need_more) ec = {};
      if (ec || n == 0) break;
    }
    if (!ec && !p.is_done() && p.is_header_done() && p.need_eof()) {
      p.put_eof(ec);  // a close-delimited body (HTTP/1.0)
      used = bytes.size();
    }
    if (ec || !p.is_done()) break;
    out.push_back(p.release());
    bytes.remove_prefix(used);
  }
  rest = std::string(bytes);
  return out;
}

// The "targets" of the origin's /__stats, unescaped.
std::vector<std::string> seen_targets(const std::string& json) {
  std::vector<std::string> out;
  auto at = json.find("\"targets\":[");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no targets in " << json;
    return out;
  }
  for (at += 11; at < json.size() && json[at] == '"';) {
    std::string s;
    for (++at; at < json.size() && json[at] != '"'; ++at) {
      if (json[at] != '\\') {
        s += json[at];
      } else if (json[++at] == 'u') {
        s += static_cast<char>(std::stoi(json.substr(at + 1, 4), nullptr, 16));
        at += 4;
      } else {
        s += json[at];
      }
    }
    out.push_back(s);
    at += 1;
    if (at < json.size() && json[at] == ',') ++at;
  }
  return out;
}

std::string printable(std::string_view raw) {
  std::string out;
  for (unsigned char c : raw) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class SmugglingMatrix : public ::testing::TestWithParam<Case> {
 protected:
  // One origin and one proxy for the whole matrix: cases are separated by resetting the
  // origin's counters, and each case runs on a connection of its own.
  static void SetUpTestSuite() {
    origin_ = std::make_unique<Origin>();
    proxy_ = std::make_unique<Proxy>(proxy_config(*origin_));
  }
  static void TearDownTestSuite() {
    proxy_.reset();
    origin_.reset();
  }
  static std::unique_ptr<Origin> origin_;
  static std::unique_ptr<Proxy> proxy_;
};
std::unique_ptr<Origin> SmugglingMatrix::origin_;
std::unique_ptr<Proxy> SmugglingMatrix::proxy_;

TEST_P(SmugglingMatrix, OriginSeesExactlyWhatTheClientMeant) {
  const Case& c = GetParam();
  SCOPED_TRACE("request bytes: " + printable(c.raw));
  auto reset = get(origin_->port(), "/__reset");
  ASSERT_TRUE(reset && reset->body() == "reset");

  Client client(proxy_->port());
  client.send(c.raw);
  // When the proxy is expected to keep the connection, ending our side is what lets us
  // read "everything it will ever answer" without waiting for a timeout: it must answer
  // all complete requests it read, then close on our EOF.
  if (c.after == After::kept) ::shutdown(client.socket().native_handle(), SHUT_WR);
  auto got = read_until_closed(client.socket().native_handle(), kCaseDeadline);
  EXPECT_TRUE(got.closed) << "the proxy neither answered nor closed within the deadline";

  std::string rest;
  auto responses = parse_responses(got.bytes, rest);
  EXPECT_EQ(rest, "") << "bytes that are not a whole response: " << printable(rest);
  ASSERT_EQ(responses.size(), c.replies.size()) << printable(got.bytes);
  for (std::size_t i = 0; i < responses.size(); ++i) {
    SCOPED_TRACE("response " + std::to_string(i));
    const auto& r = responses[i];
    EXPECT_EQ(r.result_int(), c.replies[i].status) << r.body();
    for (const auto& s : c.replies[i].has)
      EXPECT_NE(r.body().find(s), std::string::npos) << printable(s) << " not in " << r.body();
    for (const auto& s : c.replies[i].lacks)
      EXPECT_EQ(r.body().find(s), std::string::npos) << printable(s) << " in " << r.body();
    // A response after which the proxy closes says so (HTTP/1.1; 1.0 closes by default);
    // one it keeps the connection for does not.
    bool last = i + 1 == responses.size();
    if (r.version() == 11) {
      EXPECT_EQ(r.keep_alive(), !(last && c.after == After::closed)) << r.base();
    }
  }

  // Everything the proxy will forward for this connection has been forwarded by now: it
  // answered or closed, and the origin counts a request before it answers it.
  auto stats = origin_->stats();
  EXPECT_EQ(seen_targets(stats), c.seen) << stats;
}

INSTANTIATE_TEST_SUITE_P(Smuggling, SmugglingMatrix, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace floodgate::testing
