#!/usr/bin/python3
"""A small HTTPS file server for the tests of what floodgate fetches (an identity provider's
JWKS, a fleet's config): GET /any/path/NAME answers DIR/NAME over HTTPS with CERT and KEY, on
127.0.0.1 at a port of its own choosing, printed on the first line. Each answer has an ETag
(a hash of the bytes) and a GET whose If-None-Match names it gets 304, as a CDN or an object
store answers. While DIR/down exists it answers 503; a file that is not there, 404. Each GET
appends its path to DIR/hits.

    https_files.py DIR CERT KEY
"""
import hashlib
import http.server
import os
import ssl
import sys

directory, cert, key = sys.argv[1:4]


class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, status, body=b"", etag=None):
        self.send_response(status)
        if etag:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with open(os.path.join(directory, "hits"), "a") as hits:
            hits.write(self.path + "\n")
        if os.path.exists(os.path.join(directory, "down")):
            return self.answer(503)
        name = os.path.basename(self.path.split("?")[0])
        try:
            with open(os.path.join(directory, name), "rb") as f:
                body = f.read()
        except OSError:
            return self.answer(404)
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if self.headers.get("If-None-Match") == etag:
            return self.answer(304, etag=etag)
        self.answer(200, body, etag)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
