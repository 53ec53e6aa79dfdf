#!/usr/bin/python3
"""An identity provider's JWKS endpoint for the tests: serves DIR/jwks.json over HTTPS with
CERT and KEY on 127.0.0.1 at a port of its own choosing, printed on the first line. While
DIR/down exists it answers 503 (the provider is down). Each GET appends a line to DIR/hits.

    jwks_server.py DIR CERT KEY
"""
import http.server
import os
import ssl
import sys

directory, cert, key = sys.argv[1:4]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(directory, "hits"), "a") as hits:
            hits.write(self.path + "\n")
        if os.path.exists(os.path.join(directory, "down")):
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(os.path.join(directory, "jwks.json"), "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
