#include "h2_callbacks.hpp"

#include <cstring>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::http {

namespace {

// Empty DATA frames without END_STREAM a connection may send in a row: a client has no use
// for them (netty's default allows 10).
constexpr int kMaxEmptyFrames = 16;

}  // namespace

H2Connection& H2Callbacks::self(void* user) {
  return *static_cast<H2Connection*>(user);
}

H2Stream* H2Callbacks::find(H2Connection& c, std::int32_t id) {
  auto it = c.streams_.find(id);
  return it == c.streams_.end() ? nullptr : it->second.get();
}

int H2Callbacks::on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                                  void* user) {
  return guarded([&] {
    auto& c = self(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (c.flooded_) return 0;  // ignored: the connection is ending
    if (c.closing_ || c.goaway_sent_ || c.tasks_ >= c.max_tasks_) {
      // Past the bound, the streams still at work include ones nghttp2 has already closed
      // (reset by the client, or by us because of its frames): refused, and counted against
      // the reset budget like any stream the client made us reset.
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    c.streams_[frame->hd.stream_id] =
        std::make_shared<H2Stream>(frame->hd.stream_id, c.client_.get_executor());
    return 0;
  });
}

int H2Callbacks::on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                           std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                           std::uint8_t, void* user) {
  return guarded([&] {
    auto& c = self(user);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    auto* s = find(c, frame->hd.stream_id);
    if (!s) return 0;
    auto n = view(name, namelen);
    auto v = view(value, valuelen);
    s->header_bytes += namelen + valuelen + 32;
    if (s->head_done) {
      // Trailers (nghttp2 has refused pseudo-headers in them): kept for an h2 upstream, within
      // the same bound as the head; past it the stream is reset.
      if (s->header_bytes > c.max_header_bytes_)
        return static_cast<int>(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE);
      if (!s->discard_body) s->trailers.add(n, v);
      return 0;
    }
    if (s->header_bytes > c.max_header_bytes_) return 0;  // answered 431 once complete
    if (n == ":method")
      s->method = v;
    else if (n == ":scheme")
      s->scheme = v;
    else if (n == ":authority")
      s->authority = v;
    else if (n == ":path")
      s->path = v;
    else if (n == ":protocol")
      s->extended_connect = true;
    else if (n == "cookie")
      s->cookies += (s->cookies.empty() ? "" : "; ") + std::string(v);
    else
      s->head.fields.add(n, v);
    return 0;
  });
}

int H2Callbacks::on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
  return guarded([&] {
    auto& c = self(user);
    const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->hd.type == NGHTTP2_DATA) {
      // Empty DATA frames cost the sender nothing and the receiver a frame each
      // (CVE-2019-9518): past a few in a row, the connection ends.
      const bool empty = frame->hd.length == frame->data.padlen && !end;
      c.empty_frames_ = empty ? c.empty_frames_ + 1 : 0;
      if (c.empty_frames_ > kMaxEmptyFrames) {
        nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM);
        return 0;
      }
    }
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      // Whatever its code (NO_ERROR included): charged here, and not again when nghttp2 closes
      // the stream for it, which it does right after this callback.
      c.peer_reset_ = frame->hd.stream_id;
      c.charge_reset();
    }
    auto* s = find(c, frame->hd.stream_id);
    if (!s) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
        !s->head_done) {
      s->head_done = true;
      s->body_done = end;
      c.start_stream(c.streams_[frame->hd.stream_id]);
      return 0;
    }
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) && end) {
      s->body_done = true;
      s->notify();
    }
    return 0;
  });
}

int H2Callbacks::on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                               const std::uint8_t* data, std::size_t len, void* user) {
  return guarded([&] {
    auto& c = self(user);
    auto* s = find(c, id);
    if (!s || s->discard_body) {
      nghttp2_session_consume(session, id, len);
      return 0;
    }
    s->body.append(reinterpret_cast<const char*>(data), len);
    s->x.bytes_in += len;
    s->notify();
    return 0;
  });
}

int H2Callbacks::on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  return guarded([&] {
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM)
      self(user).w_.metrics.http2_flood_goaways.fetch_add(1, std::memory_order_relaxed);
    return 0;
  });
}

int H2Callbacks::on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code,
                                 void* user) {
  return guarded([&] {
    auto& c = self(user);
    auto it = c.streams_.find(id);
    const bool by_peer = std::exchange(c.peer_reset_, 0) == id;  // charged on receipt
    const bool uncharged = it != c.streams_.end() && it->second->reset_uncharged;
    // Reset by us because of the client's frames (by nghttp2, or by floodgate's bound on
    // streams at work): the client's doing, as its own resets are.
    if (code != NGHTTP2_NO_ERROR && !by_peer && !uncharged) c.charge_reset();
    if (it == c.streams_.end()) return 0;
    auto& s = *it->second;
    s.closed = true;
    s.close_code = code;
    s.notify();
    // The upstream request it was waiting on is of no use to anyone now: its connection is
    // closed, which ends the wait at once (an h2 upstream's stream is reset by the coroutine,
    // which the cancel above wakes).
    if (s.upstream) {
      boost::system::error_code ignored;
      s.upstream->stream.socket().close(ignored);
    }
    c.streams_.erase(it);  // the stream's coroutine keeps it alive until it ends
    return 0;
  });
}

ssize_t H2Callbacks::read_body(nghttp2_session* session, std::int32_t, std::uint8_t* buf,
                               std::size_t length, std::uint32_t* flags,
                               nghttp2_data_source* source, void*) {
  try {
    auto& s = *static_cast<H2Stream*>(source->ptr);
    auto n = read_body_of(s, buf, length, flags);
    if ((*flags & NGHTTP2_DATA_FLAG_EOF) && !s.out_trailers.empty()) {
      // The upstream's trailers (grpc-status) end the stream instead of the last DATA.
      if (submit_trailers(session, s.id, s.out_trailers) == 0)
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return n;
  } catch (...) {
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
}

ssize_t H2Callbacks::read_body_of(H2Stream& stream, std::uint8_t* buf, std::size_t length,
                                  std::uint32_t* flags) {
  auto* s = &stream;
  const auto left = s->out.size() - s->out_sent;
  const auto n = std::min(left, length);
  std::memcpy(buf, s->out.data() + s->out_sent, n);
  s->out_sent += n;
  s->x.bytes_out += n;
  if (s->out_sent == s->out.size()) {
    s->out.clear();
    s->out_sent = 0;
    if (s->out_done) *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  s->notify();  // room for more
  if (n == 0 && !s->out_done) return NGHTTP2_ERR_DEFERRED;
  return static_cast<ssize_t>(n);
}

}  // namespace floodgate::http
