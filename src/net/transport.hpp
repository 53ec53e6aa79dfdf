#pragma once
// One connection's byte stream: plain TCP, or TLS over it. Sessions, the relay and the
// upstream pool are written once against this type; the choice between the two is one
// predictable branch per operation, not a template instantiation of everything above it.
// Not movable: the TLS layer refers to the socket member.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "floodgate/tls/fingerprint.hpp"

namespace floodgate::http {

class Transport {
 public:
  using executor_type = boost::asio::any_io_executor;
  using tcp = boost::asio::ip::tcp;

  explicit Transport(tcp::socket socket) : socket_(std::move(socket)) {}
  explicit Transport(executor_type ex) : socket_(std::move(ex)) {}
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // From now on bytes go through TLS over the socket; takes ownership of `ssl` (SSL_new'd).
  // `fingerprint`: the server side of a listener whose limits key on the ClientHello; its
  // fingerprints are taken during the handshake (tls::collect_fingerprints).
  void start_tls(SSL* ssl, bool fingerprint = false) {
    tls_.emplace(socket_, ssl);
    if (fingerprint) tls::collect_fingerprints(ssl, &fingerprints_);
  }
  // The client's fingerprints once the handshake has read its ClientHello; null otherwise.
  const tls::Fingerprints* fingerprints() const {
    return fingerprints_.ja4.empty() ? nullptr : &fingerprints_;
  }
  bool is_tls() const { return tls_.has_value(); }
  SSL* tls_handle() { return tls_ ? tls_->native_handle() : nullptr; }
  boost::asio::ssl::stream<tcp::socket&>& tls() { return *tls_; }

  // What timeouts cancel and what the pool peeks at.
  tcp::socket& socket() { return socket_; }
  executor_type get_executor() { return socket_.get_executor(); }

  // Plain TCP: writes what the socket takes of `buffers` now, without waiting, and returns
  // what is left of them (trimmed in place). Most heads and small bodies fit the socket's
  // buffer: no operation is started for them, no timer set and no turn of the event loop
  // spent. All of them are left over TLS, or when the socket takes nothing or failed (the
  // asynchronous write that follows then reports why).
  std::span<boost::asio::const_buffer> write_now(std::span<boost::asio::const_buffer> buffers) {
    if (tls_) return buffers;
    boost::system::error_code ec;
    if (!non_blocking_) {  // once: a write that would block then returns at once
      socket_.non_blocking(true, ec);
      if (ec) return buffers;
      non_blocking_ = true;
    }
    std::size_t n = socket_.write_some(buffers, ec);
    while (!buffers.empty() && n >= buffers.front().size()) {
      n -= buffers.front().size();
      buffers = buffers.subspan(1);
    }
    if (!buffers.empty()) buffers.front() += n;
    return buffers;
  }

  template <typename MutableBuffers, typename Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBuffers& b) {
          if (tls_)
            tls_->async_read_some(b, std::move(handler));
          else
            socket_.async_read_some(b, std::move(handler));
        },
        token, buffers);
  }

  template <typename ConstBuffers, typename Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const ConstBuffers& b) {
          if (!tls_) {
            socket_.async_write_some(b, std::move(handler));
            return;
          }
          // Asio's TLS stream writes only the first buffer of a sequence per call, so a head
          // and its body would leave as two records and two system calls. Small sequences are
          // gathered into one record's worth instead (the copy is cheap next to the cipher).
          auto first = *boost::asio::buffer_sequence_begin(b);
          std::size_t total = boost::asio::buffer_size(b);
          if (first.size() >= kRecord || total == first.size()) {
            tls_->async_write_some(b, std::move(handler));
            return;
          }
          gather_.resize(std::min(total, kRecord));
          boost::asio::buffer_copy(boost::asio::buffer(gather_), b);
          tls_->async_write_some(boost::asio::buffer(gather_), std::move(handler));
        },
        token, buffers);
  }

 private:
  static constexpr std::size_t kRecord = 16 * 1024;  // a TLS record's largest plaintext

  tcp::socket socket_;
  std::optional<boost::asio::ssl::stream<tcp::socket&>> tls_;
  tls::Fingerprints fingerprints_;
  std::vector<char> gather_;   // TLS only: the current write, gathered (see async_write_some)
  bool non_blocking_ = false;  // plain TCP: the socket's own mode, set by write_now
};

}  // namespace floodgate::http
