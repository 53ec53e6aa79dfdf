#include "floodgate/decide/reply.hpp"

namespace floodgate::decide {

namespace {

// One fixed line per status, so that clients and tests can rely on it.
std::string_view line_for(int status) {
  switch (status) {
    case 400:
      return "bad request\n";
    case 401:
      return "a valid token is required\n";
    case 403:
      return "forbidden\n";
    case 404:
      return "no route for this request\n";
    case 408:
      return "request timed out\n";
    case 413:
      return "request body too large\n";
    case 431:
      return "request header too large\n";
    case 502:
      return "upstream unreachable\n";
    case 503:
      return "service unavailable\n";
    case 504:
      return "upstream timed out\n";
    default:
      return "error\n";
  }
}

}  // namespace

Reply refused(const config::Route& route, const config::Limit& limit, const limit::Params& params,
              const limit::Decision& d, limit::Micros now) {
  const auto* page = route.refusal.get();
  return Reply{
      page ? page->status : 429, {}, Reply::Refusal{&limit, params, d, now, page, route.name}};
}

void reply_headers(const Reply& r, const limit::HeaderSink& emit) {
  if (!r.request_id.empty()) emit("X-Request-Id", r.request_id);
  if (!r.alt_svc.empty()) emit("Alt-Svc", r.alt_svc);
  if (r.refusal)
    limit::rate_headers(*r.refusal->limit, r.refusal->params, r.refusal->decision, r.refusal->now,
                        emit);
  else if (!r.retry_after.empty())
    emit("Retry-After", r.retry_after);
}

std::string_view reply_content_type(const Reply& r) {
  if (r.refusal && r.refusal->page) return r.refusal->page->content_type;
  return r.refusal ? "application/json" : "text/plain; charset=utf-8";
}

std::string_view reply_body(const Reply& r, std::string& storage) {
  if (!r.refusal) {
    const auto line = line_for(r.status);
    if (r.request_id.empty()) return line;
    // Still one line: "forbidden (request id 4bf92f3577b34da6a3ce929d0e0e4736)".
    storage.assign(line.substr(0, line.size() - 1));
    storage.append(" (request id ").append(r.request_id).append(")\n");
    return storage;
  }
  if (r.refusal->page) {
    // The operator's page as written, its placeholders filled in; the values are names from
    // the config, digits and a request id (a sane token): nothing that needs escaping.
    storage.clear();
    for (const auto& piece : r.refusal->page->body) switch (piece.field) {
        case config::RefusalPage::Field::text:
          storage += piece.text;
          break;
        case config::RefusalPage::Field::limit:
          storage += r.refusal->limit->name;
          break;
        case config::RefusalPage::Field::retry_after:
          storage += std::to_string(limit::retry_after_seconds(r.refusal->decision));
          break;
        case config::RefusalPage::Field::route:
          storage += r.refusal->route;
          break;
        case config::RefusalPage::Field::request_id:
          storage += r.request_id;
          break;
      }
    return storage;
  }
  storage = limit::refusal_body(*r.refusal->limit, r.refusal->decision);
  if (!r.request_id.empty()) {  // a sane token (request_id.hpp): nothing to escape
    storage.pop_back();         // the closing brace
    storage.append(",\"request_id\":\"").append(r.request_id).append("\"}");
  }
  storage += '\n';
  return storage;
}

}  // namespace floodgate::decide
