// nghttp2's callbacks for an H2UpstreamConnection (upstream_h2.hpp). They run inside mem_recv
// or mem_send on the worker's thread, and none lets an exception out.

#include "upstream_h2_callbacks.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>
#include <utility>

#include "nghttp2_util.hpp"
#include "upstream_h2.hpp"

namespace floodgate::http {

struct H2UpstreamCallbacks {
  template <typename F>
  static int guarded(F&& f) noexcept {
    return nghttp2_guarded(std::forward<F>(f));
  }
  static H2Call* find(void* user, std::int32_t id) {
    auto& c = *static_cast<H2UpstreamConnection*>(user);
    auto it = c.calls_.find(id);
    return it == c.calls_.end() ? nullptr : it->second.get();
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    return guarded([&] {
      if (auto* c = find(user, frame->hd.stream_id)) {
        c->pending_status = 0;
        c->block_bytes = 0;
      }
      return 0;
    });
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                       std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                       std::uint8_t, void* user) {
    return guarded([&] {
      auto* c = find(user, frame->hd.stream_id);
      if (!c || frame->hd.type != NGHTTP2_HEADERS) return 0;
      auto n = view(name, namelen);
      auto v = view(value, valuelen);
      // What we said we take (SETTINGS_MAX_HEADER_LIST_SIZE) is all we keep: past it the
      // stream is reset and its user answers 502.
      c->block_bytes += namelen + valuelen + 32;
      if (c->block_bytes > H2UpstreamConnection::kMaxHeaderList)
        return static_cast<int>(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE);
      if (c->head_done) {  // nghttp2 has checked a trailer block carries no pseudo-header
        c->trailers.add(n, v);
      } else if (n == ":status") {
        int status = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), status);
        c->pending_status = ec == std::errc{} && end == v.data() + v.size() ? status : 0;
      } else if (c->pending_status >= 200) {
        c->head.add(n, v);
      }
      return 0;
    });
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    return guarded([&] {
      auto& conn = *static_cast<H2UpstreamConnection*>(user);
      if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        conn.settings_received();
        return 0;
      }
      if (frame->hd.type == NGHTTP2_GOAWAY) {
        // nghttp2 closes the streams above last_stream_id as REFUSED_STREAM; the rest finish.
        conn.goaway_ = true;
        return 0;
      }
      auto* c = find(user, frame->hd.stream_id);
      if (!c) return 0;
      if (frame->hd.type == NGHTTP2_HEADERS && !c->head_done && c->pending_status >= 200) {
        c->status = c->pending_status;
        c->head_done = true;
      }
      // A 1xx head is interim: its fields were not kept, the final head follows.
      if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
          (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        c->in_done = true;
      c->notify();
      return 0;
    });
  }

  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    return guarded([&] {
      if (frame->hd.type == NGHTTP2_HEADERS)
        if (auto* c = find(user, frame->hd.stream_id)) c->head_sent = true;
      return 0;
    });
  }

  static int on_data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t id,
                           const std::uint8_t* data, std::size_t len, void* user) {
    return guarded([&] {
      auto* c = find(user, id);
      if (!c) {
        nghttp2_session_consume(session, id, len);
        return 0;
      }
      c->in.append(reinterpret_cast<const char*>(data), len);
      c->notify();
      return 0;
    });
  }

  static int on_stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    return guarded([&] {
      auto& conn = *static_cast<H2UpstreamConnection*>(user);
      auto it = conn.calls_.find(id);
      if (it == conn.calls_.end()) return 0;
      auto& c = *it->second;
      c.closed = true;
      c.error = code;
      // RFC 9113 8.7: REFUSED_STREAM (sent, or implied by GOAWAY) means not processed.
      c.refused = code == NGHTTP2_REFUSED_STREAM && !c.head_done;
      c.notify();
      conn.calls_.erase(it);
      conn.idle_watch();  // the last stream ended: the idle clock starts
      return 0;
    });
  }

  static ssize_t read_body(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void*) {
    try {
      auto& c = *static_cast<H2Call*>(source->ptr);
      const auto n = std::min(c.out.size(), length);
      std::memcpy(buf, c.out.data(), n);
      if (c.replayable && c.sent.size() + n <= H2UpstreamConnection::kRetainedBody) {
        c.sent.append(c.out, 0, n);
      } else {
        c.replayable = false;
        c.sent.clear();
      }
      c.out.erase(0, n);
      if (c.out.empty() && c.out_done) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (!c.out_trailers.empty() && submit_trailers(session, id, c.out_trailers) == 0)
          *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      }
      c.notify();  // room for more
      if (n == 0 && !c.out_done) return NGHTTP2_ERR_DEFERRED;
      return static_cast<ssize_t>(n);
    } catch (...) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
  }
};

nghttp2_session_callbacks* new_upstream_callbacks() {
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) return nullptr;
  using C = H2UpstreamCallbacks;
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &C::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, &C::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &C::on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, &C::on_frame_send);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &C::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &C::on_stream_close);
  return cb;
}

ssize_t read_upstream_body(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                           std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                           void* user) {
  return H2UpstreamCallbacks::read_body(session, id, buf, length, flags, source, user);
}

}  // namespace floodgate::http
