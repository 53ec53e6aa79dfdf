#!/usr/bin/python3
"""A real gRPC server and client (Debian's python3-grpcio) for floodgate's gRPC tests.

  grpc_peer.py server              serves Echo (echo.proto) on 127.0.0.1, prints the port
  grpc_peer.py call PORT KIND [N] [metadata k=v ...]
                                   calls KIND (unary, server, client, bidi, pingpong, count,
                                   sleep)
                                   through 127.0.0.1:PORT and prints one JSON line: the
                                   status code, details, replies, initial and trailing metadata

The stubs come from echo.proto, compiled by python3-grpc-tools into a directory of the
system's temp directory named after the file's digest, once.
"""
import hashlib
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))


def load_stubs():
    # Compiled once per version of echo.proto and kept in the temp directory: every call is a
    # process of its own, and tests running beside these measure time.
    proto = os.path.join(HERE, "echo.proto")
    digest = hashlib.sha256(open(proto, "rb").read()).hexdigest()[:16]
    out = os.path.join(tempfile.gettempdir(), "fg-grpc-stubs-" + digest)
    if not os.path.exists(os.path.join(out, "echo_pb2_grpc.py")):
        scratch = tempfile.mkdtemp(prefix="fg-grpc-")
        rc = protoc.main(["protoc", "-I" + HERE, "--python_out=" + scratch,
                          "--grpc_python_out=" + scratch, proto])
        if rc != 0:
            sys.exit("protoc failed")
        try:
            os.rename(scratch, out)  # atomic: a process compiling beside this one loses the race
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
    sys.path.insert(0, out)
    import echo_pb2
    import echo_pb2_grpc
    return echo_pb2, echo_pb2_grpc


pb, pb_grpc = load_stubs()


class Echo(pb_grpc.EchoServicer):
    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def _count(self):
        with self.lock:
            self.calls += 1

    def Unary(self, request, context):
        self._count()
        if request.text.startswith("sleep:"):
            time.sleep(float(request.text[6:]))
        context.set_trailing_metadata((("x-tokens-used", str(request.n)),))
        return pb.Msg(text=request.text, n=request.n)

    def ServerStream(self, request, context):
        self._count()
        for i in range(request.n):
            yield pb.Msg(text="%s-%d" % (request.text, i), n=i)
        context.set_trailing_metadata((("x-tokens-used", str(request.n)),))

    def ClientStream(self, request_iterator, context):
        self._count()
        texts = [m.text for m in request_iterator]
        return pb.Msg(text=",".join(texts), n=len(texts))

    def Bidi(self, request_iterator, context):
        self._count()
        for m in request_iterator:
            yield pb.Msg(text="echo:" + m.text, n=m.n)

    def Count(self, request, context):
        return pb.Msg(n=self.calls)


def serve():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_EchoServicer_to_server(Echo(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


def call(port, kind, n, metadata):
    channel = grpc.insecure_channel("127.0.0.1:%d" % port,
                                    options=[("grpc.enable_retries", 0)])
    stub = pb_grpc.EchoStub(channel)
    result = {"code": "OK", "details": "", "replies": [], "initial": {}, "trailing": {}}
    try:
        if kind in ("unary", "sleep", "count"):
            method = stub.Count if kind == "count" else stub.Unary
            text = "sleep:%d" % n if kind == "sleep" else "hello"
            reply, c = method.with_call(pb.Msg(text=text, n=n), metadata=metadata, timeout=20)
            replies = [reply]
        elif kind == "server":
            c = stub.ServerStream(pb.Msg(text="s", n=n), metadata=metadata, timeout=20)
            replies = list(c)
        elif kind == "client":
            msgs = iter([pb.Msg(text="m%d" % i, n=i) for i in range(n)])
            reply, c = stub.ClientStream.with_call(msgs, metadata=metadata, timeout=20)
            replies = [reply]
        elif kind == "bidi":
            msgs = iter([pb.Msg(text="b%d" % i, n=i) for i in range(n)])
            c = stub.Bidi(msgs, metadata=metadata, timeout=20)
            replies = list(c)
        elif kind == "pingpong":
            # Each message goes only once the echo of the one before came back: a proxy that
            # sends a request's body whole before it reads the response never answers the first.
            echoed = queue.Queue()

            def messages():
                for i in range(n):
                    yield pb.Msg(text="p%d" % i, n=i)
                    echoed.get(timeout=10)

            c = stub.Bidi(messages(), metadata=metadata, timeout=20)
            replies = []
            for r in c:
                replies.append(r)
                echoed.put(True)
        else:
            sys.exit("unknown call kind " + kind)
        result["replies"] = [{"text": r.text, "n": r.n} for r in replies]
    except grpc.RpcError as e:
        c = e
        result["code"] = e.code().name
        result["details"] = e.details() or ""
    result["initial"] = {k: v for k, v in (c.initial_metadata() or ())}
    result["trailing"] = {k: v for k, v in (c.trailing_metadata() or ())}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "server":
        serve()
    elif len(sys.argv) >= 4 and sys.argv[1] == "call":
        n = int(sys.argv[4]) if len(sys.argv) > 4 else 3
        md = [tuple(a.split("=", 1)) for a in sys.argv[5:]]
        call(int(sys.argv[2]), sys.argv[3], n, md)
    else:
        sys.exit(__doc__)
