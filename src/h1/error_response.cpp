#include "error_response.hpp"

namespace floodgate::http {

Answer render(Reply reply, unsigned version, bool keep_alive, const Exchange* x) {
  if (x) {
    reply.request_id = x->request_id;
    reply.alt_svc = x->alt_svc;
  }
  AnswerWriter w(static_cast<unsigned>(reply.status), version, keep_alive);
  reply_headers(reply,
                [&w](std::string_view name, std::string_view value) { w.header(name, value); });
  std::string storage;
  return std::move(w).finish(reply_content_type(reply), reply_body(reply, storage));
}

Answer error_response(boost::beast::http::status status, unsigned version, bool keep_alive,
                      std::string_view retry_after) {
  return render(Reply{static_cast<int>(status), retry_after, std::nullopt}, version, keep_alive);
}

}  // namespace floodgate::http
