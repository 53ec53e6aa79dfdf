#pragma once
// Where an HTTP/1.x request enters the pipeline: its head's facts into the exchange. The
// views point into `req`, which outlives the exchange.

#include "exchange/exchange.hpp"

namespace floodgate::http {

// `can_continue`: keep-alive and no body left unread (with one, an answer of ours must close
// the connection, or the body's bytes would be read as the next request).
void take_http1_head(Exchange& x, const RequestHead& req, bool can_continue);

}  // namespace floodgate::http
