#!/usr/bin/python3
"""An h2c origin that ends connections with GOAWAY, for the h2 upstream's retry test.

Usage: goaway_origin.py
Prints its port, then serves. On each connection it answers at most one stream, then sends
GOAWAY naming that stream as the last it processed: every other stream open on the
connection was refused unprocessed, and a proxy may send it again on a new connection (RFC
9113 6.8). The first connection it ever accepts answers none: GOAWAY with last-stream-id 0.
Every request it does process is answered 200 with "served N" (N counts them), so a test
sees that nothing was lost and nothing processed twice. GET /count answers the count
without counting itself. Uses Debian's python3-h2.
"""

import socket
import threading

import h2.config
import h2.connection
import h2.events

lock = threading.Lock()
served = 0
connections = 0


def handle(sock, first):
    global served
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    done = False
    while not done:
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived) and not done:
                path = dict((k.decode() if isinstance(k, bytes) else k,
                             v.decode() if isinstance(v, bytes) else v)
                            for k, v in event.headers).get(":path", "")
                if first:
                    conn.close_connection(last_stream_id=0)
                else:
                    with lock:
                        if path != "/count":
                            served += 1
                        body = ("served %d\n" % served).encode()
                    conn.send_headers(event.stream_id, [(":status", "200"),
                                                        ("content-length", str(len(body)))])
                    conn.send_data(event.stream_id, body, end_stream=True)
                    conn.close_connection(last_stream_id=event.stream_id)
                done = True
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    sock.close()


def main():
    global connections
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    while True:
        sock, _ = listener.accept()
        connections += 1
        threading.Thread(target=handle, args=(sock, connections == 1), daemon=True).start()


if __name__ == "__main__":
    main()
