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


CASES = {
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
