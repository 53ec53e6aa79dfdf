#!/usr/bin/python3
"""Envoy's side of the rate limit service, for floodgate's RLS tests: a real gRPC client
(Debian's python3-grpcio) with the messages compiled at test time (python3-grpc-tools) from
the envoy/... files beside this script, which restate the API's own packages and numbers.

  rls_peer.py call PORT REQUEST [N]   N calls (default 1) of ShouldRateLimit on 127.0.0.1:PORT,
                                      one at a time; prints one JSON line: the last call's
                                      answer, and how many of the N were OK, OVER_LIMIT or an
                                      error (by gRPC code)
  rls_peer.py raw PORT HEX            one call whose message is the bytes HEX; prints the answer

REQUEST is JSON: {"domain": D, "hits": N, "timeout": SECONDS, "tls": {"ca": PEM_FILE, "name":
SERVER_NAME} (TLS with ALPN h2 instead of h2c), "descriptors": [{"entries":
[[KEY, VALUE], ...], "hits": N, "limit": [REQUESTS_PER_UNIT, "MINUTE"]}]}; "hits" on a
descriptor sets its hits_addend wrapper (0 included). An answer is {"code": gRPC code name,
"details": ..., "overall": OK|OVER_LIMIT, "statuses": [{"code", "limit": {"rpu", "unit",
"name"}, "remaining", "reset"}]}.
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile

import grpc
import pkg_resources
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["envoy/type/v3/ratelimit_unit.proto", "envoy/config/core/v3/base.proto",
          "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
          "envoy/service/ratelimit/v3/rls.proto"]
METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def load_messages():
    # Compiled once per version of the files, into the temp directory (each call of this
    # script is a process of its own).
    digest = hashlib.sha256()
    for p in PROTOS:
        digest.update(open(os.path.join(HERE, p), "rb").read())
    out = os.path.join(tempfile.gettempdir(), "fg-rls-stubs-" + digest.hexdigest()[:16])
    if not os.path.exists(os.path.join(out, "done")):
        scratch = tempfile.mkdtemp(prefix="fg-rls-")
        well_known = pkg_resources.resource_filename("grpc_tools", "_proto")
        rc = protoc.main(["protoc", "-I" + HERE, "-I" + well_known, "--python_out=" + scratch]
                         + [os.path.join(HERE, p) for p in PROTOS])
        if rc != 0:
            sys.exit("protoc failed")
        open(os.path.join(scratch, "done"), "w").close()
        try:
            os.rename(scratch, out)  # atomic: a process compiling beside this one loses the race
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
    sys.path.insert(0, out)
    from envoy.service.ratelimit.v3 import rls_pb2
    return rls_pb2


rls = load_messages()
UNITS = ["UNKNOWN", "SECOND", "MINUTE", "HOUR", "DAY", "MONTH", "YEAR"]


def request_of(spec):
    req = rls.RateLimitRequest(domain=spec.get("domain", ""), hits_addend=spec.get("hits", 0))
    for d in spec.get("descriptors", []):
        desc = req.descriptors.add()
        for key, value in d.get("entries", []):
            desc.entries.add(key=key, value=value)
        if "hits" in d:
            desc.hits_addend.value = d["hits"]
        if "limit" in d:
            desc.limit.requests_per_unit = d["limit"][0]
            unit = d["limit"][1]  # a name, or a number the enum does not have
            desc.limit.unit = UNITS.index(unit) if isinstance(unit, str) else unit
    return req


def answer_of(response):
    out = {"code": "OK", "details": "",
           "overall": rls.RateLimitResponse.Code.Name(response.overall_code), "statuses": []}
    for s in response.statuses:
        st = {"code": rls.RateLimitResponse.Code.Name(s.code), "remaining": s.limit_remaining}
        if s.HasField("current_limit"):
            st["limit"] = {"rpu": s.current_limit.requests_per_unit,
                           "unit": rls.RateLimitResponse.RateLimit.Unit.Name(s.current_limit.unit),
                           "name": s.current_limit.name}
        if s.HasField("duration_until_reset"):
            st["reset"] = s.duration_until_reset.seconds + s.duration_until_reset.nanos / 1e9
        out["statuses"].append(st)
    out["headers"] = {h.key: h.value for h in response.response_headers_to_add}
    return out


def error_of(e):
    return {"code": e.code().name, "details": e.details() or ""}


def channel_of(port, spec):
    tls = spec.get("tls")
    if not tls:
        return grpc.insecure_channel("127.0.0.1:%d" % port)
    creds = grpc.ssl_channel_credentials(root_certificates=open(tls["ca"], "rb").read())
    return grpc.secure_channel("127.0.0.1:%d" % port, creds,
                               options=[("grpc.ssl_target_name_override", tls["name"])])


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    spec = json.loads(sys.argv[3]) if mode == "call" else {}
    channel = channel_of(port, spec)
    if mode == "raw":
        stub = channel.unary_unary(METHOD, request_serializer=lambda b: b,
                                   response_deserializer=rls.RateLimitResponse.FromString)
        try:
            print(json.dumps(answer_of(stub(bytes.fromhex(sys.argv[3]), timeout=10))))
        except grpc.RpcError as e:
            print(json.dumps(error_of(e)))
        return
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    stub = channel.unary_unary(METHOD, request_serializer=rls.RateLimitRequest.SerializeToString,
                               response_deserializer=rls.RateLimitResponse.FromString)
    req = request_of(spec)
    counts = {"OK": 0, "OVER_LIMIT": 0}
    last = None
    for _ in range(n):
        try:
            last = answer_of(stub(req, timeout=spec.get("timeout", 10)))
            counts[last["overall"]] = counts.get(last["overall"], 0) + 1
        except grpc.RpcError as e:
            last = error_of(e)
            counts[last["code"]] = counts.get(last["code"], 0) + 1
    last["counts"] = counts
    print(json.dumps(last))


if __name__ == "__main__":
    main()
