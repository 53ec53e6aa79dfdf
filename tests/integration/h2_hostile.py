#!/usr/bin/python3
"""Raw HTTP/2 frames a well-behaved client would not send, for the HTTP/2 tests.

Usage: h2_hostile.py PORT CASE
Prints one line: what the server did with the stream (or the connection):
  status N        a response with :status N
  reset CODE      RST_STREAM with that error code
  goaway CODE     GOAWAY with that error code (the connection ends)
  closed          the connection closed with neither
It uses python3-h2 (Debian's package) with its own header checks off, so that it can send
what the cases need; nothing is sent that HTTP/2 framing itself cannot carry.
"""

import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

HOST = "127.0.0.1"


def connect(port):
    sock = socket.create_connection((HOST, port), timeout=5)
    config = h2.config.H2Configuration(
        client_side=True,
        header_encoding="utf-8",
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
        validate_inbound_headers=False,
    )
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def base(port, path="/echo", method="GET"):
    return [
        (":method", method),
        (":scheme", "http"),
        (":authority", f"{HOST}:{port}"),
        (":path", path),
    ]


def outcome(sock, conn, stream_id):
    """Reads until the stream is answered, reset, or the connection ends."""
    while True:
        try:
            data = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            return "closed"
        if not data:
            return "closed"
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            return "closed"
        try:
            sock.sendall(conn.data_to_send())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the events already read still tell what happened
        for e in events:
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == stream_id:
                return "status " + dict(e.headers)[":status"]
            if isinstance(e, h2.events.StreamReset) and e.stream_id == stream_id:
                return "reset " + e.error_code.name
            if isinstance(e, h2.events.ConnectionTerminated):
                return "goaway " + e.error_code.name


def send_headers(port, headers, end_stream=True):
    sock, conn = connect(port)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, headers, end_stream=end_stream)
    sock.sendall(conn.data_to_send())
    return sock, conn, sid


def case_headers(port, extra, path="/echo"):
    sock, conn, sid = send_headers(port, base(port, path) + extra)
    return outcome(sock, conn, sid)


def case_length_mismatch(port):
    # content-length says 10, the DATA carries 4: the stream must not reach the upstream.
    sock, conn, sid = send_headers(
        port, base(port, "/echo", "POST") + [("content-length", "10")], end_stream=False
    )
    conn.send_data(sid, b"abcd", end_stream=True)
    sock.sendall(conn.data_to_send())
    return outcome(sock, conn, sid)


def case_rapid_reset(port):
    # Streams opened and reset at once, many more than max_resets_per_second.
    sock, conn = connect(port)
    for _ in range(2000):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, base(port, "/slow/1000"), end_stream=True)
        conn.reset_stream(sid)
        try:
            sock.sendall(conn.data_to_send())
        except (BrokenPipeError, ConnectionResetError):
            break  # the server stopped reading: what it said before is still to be read
    return outcome(sock, conn, -1)


def case_too_many_streams(port):
    # More streams at once than max_concurrent_streams: the ones past it are refused.
    sock, conn = connect(port)
    conn.local_settings.max_concurrent_streams = 1000
    sids = []
    for _ in range(20):
        sid = conn.get_next_available_stream_id()
        conn.update_settings({})  # keep h2 from checking the peer's limit itself
        conn.max_outbound_streams = 1000
        conn.send_headers(sid, base(port, "/slow/500"), end_stream=True)
        sids.append(sid)
    sock.sendall(conn.data_to_send())
    refused = 0
    answered = 0
    while refused + answered < len(sids):
        data = sock.recv(65536)
        if not data:
            break
        for e in conn.receive_data(data):
            if isinstance(e, h2.events.StreamReset):
                refused += 1
            if isinstance(e, h2.events.ResponseReceived):
                answered += 1
        sock.sendall(conn.data_to_send())
    return f"answered {answered} refused {refused}"


def case_empty_data_flood(port):
    # A request body sent as empty DATA frames that never end it (CVE-2019-9518).
    sock, conn, sid = send_headers(port, request(port, "POST"), end_stream=False)
    for _ in range(200):
        conn.send_data(sid, b"", end_stream=False)
    try:
        sock.sendall(conn.data_to_send())
    except (BrokenPipeError, ConnectionResetError):
        pass
    return outcome(sock, conn, sid)


def case_stalled_header_block(port):
    # A HEADERS frame without END_HEADERS, then silence: the header block never ends. The
    # server's SETTINGS is acknowledged first: nothing but CONTINUATION may follow the HEADERS.
    sock, conn = connect(port)
    conn.receive_data(sock.recv(65536))
    sock.sendall(conn.data_to_send())
    block = conn.encoder.encode(request(port))
    frame = len(block).to_bytes(3, "big") + bytes([0x1, 0x0]) + (1).to_bytes(4, "big") + block
    sock.sendall(frame)
    sock.settimeout(10)
    started = time.monotonic()
    while True:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            result = "still open"
            break
        except ConnectionResetError:
            data = b""
        if not data:
            result = "closed"
            break
    return f"{result} after {int((time.monotonic() - started) * 1000)} ms"


def request(port, method="GET", path="/echo", authority=True):
    headers = [(":method", method), (":scheme", "http")]
    if authority:
        headers.append((":authority", f"{HOST}:{port}"))
    return headers + [(":path", path)]


def without(headers, name):
    return [h for h in headers if h[0] != name]


def replaced(headers, name, value):
    return [(n, value if n == name else v) for n, v in headers]


def stream(port, headers, body=None):
    """One stream on a fresh connection: the head, then `body` (if any) as one DATA frame."""
    sock, conn, sid = send_headers(port, headers, end_stream=body is None)
    if body is not None:
        conn.send_data(sid, body, end_stream=True)
        sock.sendall(conn.data_to_send())
    try:
        return outcome(sock, conn, sid)
    finally:
        sock.close()


# The HTTP/2 smuggling matrix: what an HTTP/2-to-HTTP/1.1 proxy must never turn into an
# upstream request (RFC 9113 sections 8.1-8.3 and the h2-downgrade attacks: a field or
# pseudo-header that would split, reframe or re-target the HTTP/1.1 request), then what is
# allowed. Each case: (headers, body or None).
def matrix(p):
    r = request(p)
    post = request(p, "POST")
    return {
        # connection-specific fields (8.2.2)
        "connection": (r + [("connection", "keep-alive")], None),
        "keep-alive": (r + [("keep-alive", "timeout=5")], None),
        "proxy-connection": (r + [("proxy-connection", "keep-alive")], None),
        "upgrade": (r + [("upgrade", "h2c")], None),
        "transfer-encoding-chunked": (post + [("transfer-encoding", "chunked")], b"0\r\n\r\n"),
        "transfer-encoding-identity": (r + [("transfer-encoding", "identity")], None),
        "te-gzip": (r + [("te", "gzip")], None),
        "te-trailers-and-gzip": (r + [("te", "trailers, gzip")], None),
        # field names and values (8.2.1)
        "upper-case-name": (r + [("X-Upper", "1")], None),
        "space-in-name": (r + [("x a", "1")], None),
        "colon-in-name": (r + [("x:a", "1")], None),
        "empty-name": (r + [("", "1")], None),
        "crlf-in-value": (r + [("x-a", "1\r\nx-b: 2")], None),
        "lf-in-value": (r + [("x-a", "1\nx-b: 2")], None),
        "cr-in-value": (r + [("x-a", "1\rx-b: 2")], None),
        "nul-in-value": (r + [("x-a", "1\x00")], None),
        "crlf-in-cookie": (r + [("cookie", "a=1\r\nx-b: 2")], None),
        # pseudo-header fields (8.3)
        "missing-method": (without(r, ":method"), None),
        "missing-scheme": (without(r, ":scheme"), None),
        "missing-path": (without(r, ":path"), None),
        "empty-path": (replaced(r, ":path", ""), None),
        "duplicate-method": (r + [(":method", "POST")], None),
        "duplicate-path": (r + [(":path", "/other")], None),
        "duplicate-authority": (r + [(":authority", "elsewhere.example")], None),
        "unknown-pseudo": (r + [(":foo", "1")], None),
        "status-in-request": (r + [(":status", "200")], None),
        "pseudo-after-field": (without(r, ":path") + [("x-a", "1"), (":path", "/echo")], None),
        "upper-case-pseudo": (replaced(r, ":path", "/echo") + [(":Path", "/x")], None),
        # a request line or Host smuggled into a pseudo-header (the h2 downgrade)
        "space-in-path": (replaced(r, ":path", "/echo HTTP/1.1"), None),
        "crlf-in-path": (replaced(r, ":path", "/echo HTTP/1.1\r\nHost: x\r\n\r\nGET /b"), None),
        "space-in-method": (replaced(r, ":method", "GET /x"), None),
        "crlf-in-method": (replaced(r, ":method", "GET\r\nx: y"), None),
        "space-in-authority": (replaced(r, ":authority", "a b"), None),
        "crlf-in-authority": (replaced(r, ":authority", "a\r\nx: y"), None),
        "userinfo-in-authority": (replaced(r, ":authority", f"user@{HOST}:{p}"), None),
        "path-in-authority": (replaced(r, ":authority", f"{HOST}/admin"), None),
        "port-not-a-number": (replaced(r, ":authority", f"{HOST}:80x"), None),
        "host-twice": (without(r, ":authority") + [("host", HOST), ("host", HOST)], None),
        "host-invalid": (without(r, ":authority") + [("host", f"user@{HOST}")], None),
        # content-length against DATA (8.1.1)
        "length-short": (post + [("content-length", "10")], b"abcd"),
        "length-long": (post + [("content-length", "2")], b"abcd"),
        "length-without-data": (post + [("content-length", "5")], None),
        "length-not-a-number": (post + [("content-length", "abc")], b"abc"),
        "length-two-values": (post + [("content-length", "4"), ("content-length", "5")], b"abcd"),
        # host against :authority (8.3.1), methods floodgate does not forward
        "host-disagrees": (r + [("host", "elsewhere.example")], None),
        "connect": ([(":method", "CONNECT"), (":authority", f"{HOST}:{p}")], None),
        "extended-connect": (replaced(request(p, "CONNECT"), ":path", "/ws")
                             + [(":protocol", "websocket")], None),
        # allowed
        "ok-te-trailers": (r + [("te", "trailers")], None),
        "ok-host-agrees": (r + [("host", f"{HOST}:{p}")], None),
        "ok-host-only": (without(r, ":authority") + [("host", f"{HOST}:{p}")], None),
        "ok-cookie-crumbs": (r + [("cookie", "a=1"), ("cookie", "b=2")], None),
        "ok-post-with-length": (post + [("content-length", "4")], b"abcd"),
    }


def case_matrix(port):
    lines = []
    for name, (headers, body) in matrix(port).items():
        lines.append(f"{name}: {stream(port, headers, body)}")
    return "\n".join(lines)


CASES = {
    "matrix": case_matrix,
    "empty-data-flood": case_empty_data_flood,
    "stalled-header-block": case_stalled_header_block,
    "connection-header": lambda p: case_headers(p, [("connection", "keep-alive")]),
    "transfer-encoding": lambda p: case_headers(p, [("transfer-encoding", "chunked")]),
    "te-gzip": lambda p: case_headers(p, [("te", "gzip")]),
    "te-trailers": lambda p: case_headers(p, [("te", "trailers")]),
    "upper-case-name": lambda p: case_headers(p, [("X-Upper", "1")]),
    "newline-in-value": lambda p: case_headers(p, [("x-a", "1\r\nx-b: 2")]),
    "duplicate-path": lambda p: case_headers(p, [(":path", "/other")]),
    "host-disagrees": lambda p: case_headers(p, [("host", "elsewhere.example")]),
    "host-agrees": lambda p: case_headers(p, [("host", f"{HOST}:{p}")]),
    "length-mismatch": case_length_mismatch,
    "rapid-reset": case_rapid_reset,
    "too-many-streams": case_too_many_streams,
}

if __name__ == "__main__":
    print(CASES[sys.argv[2]](int(sys.argv[1])))
