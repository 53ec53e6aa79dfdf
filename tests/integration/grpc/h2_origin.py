#!/usr/bin/python3
"""A scripted h2c origin for the h2 upstream's tests: one that ends connections with GOAWAY,
or a broken or hostile one.

Usage: h2_origin.py MODE
Prints its port, then serves every connection in MODE:
  goaway             answers at most one stream per connection, then GOAWAY naming that
                     stream as the last it processed: every other stream on the connection
                     was refused unprocessed, and a proxy may send it again on a new
                     connection (RFC 9113 6.8). The first connection it accepts answers
                     none (GOAWAY with last-stream-id 0). Each request it processes is
                     answered 200 "served N" (N counts them; GET /count answers the count
                     without counting itself), so a test sees nothing lost or run twice.
  reset-before-head  RST_STREAM (INTERNAL_ERROR) instead of a response
  reset-mid-body     a 200 head and 1000 bytes of its body, then RST_STREAM (INTERNAL_ERROR)
  close-before-head  closes the connection once the request has arrived
  close-mid-body     a 200 head and 1000 bytes of its body, then closes the connection
  huge-head          a response head of about 100 KB (past any sane header list size)
  no-status          a response head without :status (a malformed response)
Uses Debian's python3-h2.
"""

import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions

lock = threading.Lock()
served = 0
connections = 0


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def answer(mode, conn, sock, stream_id, path, first):
    """Answers one request; returns False when the connection is to be closed at once."""
    global served
    if mode == "goaway":
        if first:
            conn.close_connection(last_stream_id=0)
            return True
        with lock:
            if path != "/count":
                served += 1
            body = ("served %d\n" % served).encode()
        conn.send_headers(stream_id, [(":status", "200"), ("content-length", str(len(body)))])
        conn.send_data(stream_id, body, end_stream=True)
        conn.close_connection(last_stream_id=stream_id)
    elif mode == "reset-before-head":
        conn.reset_stream(stream_id, error_code=2)
    elif mode in ("reset-mid-body", "close-mid-body"):
        conn.send_headers(stream_id, [(":status", "200"), ("content-length", "100000")])
        conn.send_data(stream_id, b"x" * 1000)
        if mode == "reset-mid-body":
            conn.reset_stream(stream_id, error_code=2)
        else:
            sock.sendall(conn.data_to_send())
            return False
    elif mode == "close-before-head":
        return False
    elif mode == "huge-head":
        conn.send_headers(stream_id, [(":status", "200")] +
                          [("x-big-%d" % i, "v" * 1000) for i in range(100)], end_stream=True)
    elif mode == "no-status":
        conn.send_headers(stream_id, [("x-no-status", "1")], end_stream=True)
    return True


def handle(sock, mode, first):
    config = h2.config.H2Configuration(client_side=False, validate_outbound_headers=False,
                                       normalize_outbound_headers=False)
    conn = h2.connection.H2Connection(config=config)
    conn.max_outbound_frame_size = 16384
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    done = False
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived) and not done:
                    path = dict((text(k), text(v)) for k, v in event.headers).get(":path", "")
                    if not answer(mode, conn, sock, event.stream_id, path, first):
                        sock.close()
                        return
                    done = mode == "goaway"
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
    except (OSError, h2.exceptions.H2Error):
        pass
    sock.close()


def main():
    global connections
    mode = sys.argv[1] if len(sys.argv) > 1 else "goaway"
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    while True:
        sock, _ = listener.accept()
        connections += 1
        threading.Thread(target=handle, args=(sock, mode, connections == 1), daemon=True).start()


if __name__ == "__main__":
    main()
