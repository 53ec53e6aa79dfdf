#include "rls_service.hpp"

#include <array>
#include <chrono>
#include <string>

#include "exchange/grpc.hpp"
#include "rls_call.hpp"

namespace floodgate::rls {
namespace {

using http::Fields;
using http::Front;
using http::ResponseBody;
using http::ResponseHead;

// An answer that is no gRPC call at all: the HTTP status gRPC's protocol gives it.
boost::asio::awaitable<void> http_status(Front& front, http::Exchange& x, int status) {
  ResponseHead head;
  head.status = status;
  x.status = status;
  front.set_head(head, ResponseBody{0, false});
  co_await front.write_body({}, true, nullptr);
}

// A gRPC error: trailers-only (one HEADERS frame with grpc-status and grpc-message).
boost::asio::awaitable<void> grpc_error(Front& front, http::Exchange& x, GrpcCode code,
                                        std::string_view message) {
  ResponseHead head;
  head.status = 200;
  head.fields.add("content-type", "application/grpc");
  head.fields.add("grpc-status", std::to_string(static_cast<int>(code)));
  if (!message.empty()) head.fields.add("grpc-message", http::percent_encoded(message));
  if (code == GrpcCode::unimplemented) head.fields.add("grpc-accept-encoding", "identity");
  x.status = 200;
  front.set_head(head, ResponseBody{0, false});
  co_await front.write_body({}, true, nullptr);
}

// The call as replay fields (config::ReplayField::Kind::descriptors): rls:domain, and per
// descriptor i rls:i (its entries), rls:i:hits (when not 1), rls:i:limit (its own limit).
void record_call(const decide::DescriptorCall& call, std::string& out) {
  out += "\"rls:domain\":\"";
  decide::append_logged_text(out, call.domain);  // any bytes: a domain is protobuf `bytes`
  out += '"';
  for (std::size_t i = 0; i < call.descriptors.size(); ++i) {
    const auto& d = call.descriptors[i];
    const auto n = std::to_string(i);
    out += ",\"rls:" + n + "\":\"";
    decide::append_entries_text(out, call.entries_of(d));
    out += '"';
    if (d.hits != 1) out += ",\"rls:" + n + ":hits\":\"" + std::to_string(d.hits) + '"';
    if (d.has_own_limit())
      out += ",\"rls:" + n + ":limit\":\"" + std::to_string(d.own_limit) + "/" +
             std::to_string(d.own_seconds) + '"';
  }
}

bool records_descriptors(const config::Config& c) {
  for (const auto& f : c.log.replay_fields)
    if (f.kind == config::ReplayField::Kind::descriptors) return true;
  return false;
}

}  // namespace

boost::asio::awaitable<void> RlsService::serve(Front& front, http::Exchange& x) {
  x.protocol = "rls";
  const auto started = std::chrono::steady_clock::now();
  const auto& fields = *x.fields;
  if (x.method != "POST") co_return co_await http_status(front, x, 405);
  if (!http::is_grpc(fields)) co_return co_await http_status(front, x, 415);
  if (x.raw_target != kPath)
    co_return co_await grpc_error(front, x, GrpcCode::unimplemented,
                                  "floodgate serves " + std::string(kPath.substr(1)) + " only");
  const auto deadline = parse_timeout(fields.get("grpc-timeout"));

  std::string body;
  std::array<char, 4096> piece{};
  while (!front.body_done()) {
    auto read = co_await front.read_body(piece);
    if (!read) co_return;  // the client went away or sent too much: the stream is reset
    body.append(piece.data(), read.n);
    if (body.size() > kMaxMessage + 5)
      co_return co_await grpc_error(front, x, GrpcCode::resource_exhausted,
                                    describe(Unframed::too_large));
    if (read.last) break;
  }
  std::string_view message;
  if (auto u = unframe(body, kMaxMessage, message); u != Unframed::ok)
    co_return co_await grpc_error(front, x, code_of(u), describe(u));

  CallRecord record;
  std::unique_ptr<CallScratch> scratch;
  if (spare_.empty()) {
    scratch = std::make_unique<CallScratch>();
  } else {
    scratch = std::move(spare_.back());
    spare_.pop_back();
  }
  auto answer = co_await should_rate_limit(gate_, x.config, message, x.arrived, *scratch, record);
  x.route = record.route;
  x.admission = std::move(record.admission);
  if (record.read && x.config->log.access_log && records_descriptors(*x.config))
    record_call(scratch->call, x.service_fields);
  if (spare_.size() < kSpares) spare_.push_back(std::move(scratch));
  if (deadline && std::chrono::steady_clock::now() - started > *deadline)
    co_return co_await grpc_error(front, x, GrpcCode::deadline_exceeded,
                                  "decided after the call's grpc-timeout");
  if (answer.code != GrpcCode::ok)
    co_return co_await grpc_error(front, x, answer.code, answer.message);

  ResponseHead head;
  head.status = 200;
  head.fields.add("content-type", "application/grpc");
  x.status = 200;
  std::string framed;
  frame(framed, answer.body);
  Fields trailers;
  trailers.add("grpc-status", "0");
  front.set_head(head, ResponseBody{std::nullopt, true});
  co_await front.write_body(framed, true, &trailers);
}

}  // namespace floodgate::rls
