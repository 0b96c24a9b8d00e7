#!/usr/bin/env python3
"""Writes the seed corpus of every harness into tests/fuzz/corpus/<name>/: a few real,
valid inputs each (what conduitctl, libhoplite, libmrpc-grpc and operators send), from
which libFuzzer mutates. Run it after changing a wire format; files found by fuzzing
(regressions) live next to these under their own names and are kept.

    tests/fuzz/make_seeds.py
"""
import base64
import json
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def write(name, seed, data):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + seed), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


TOPOLOGY = {
    "hosts": [
        {"name": "h0", "addr": "10.0.0.1", "rack": "r0", "pod": "p0", "path_addrs": ["10.1.0.1", "10.2.0.1"]},
        {"name": "h1", "addr": "10.0.0.2", "rack": "r1", "pod": "p0", "path_addrs": ["10.1.0.2", "10.2.0.2"]},
    ],
    "links": [{"hosts": ["h0", "h1"], "paths": [["10.9.0.1", "10.9.0.2"], ["10.9.0.5", "10.9.0.6"]]}],
}
TOPOLOGY_V6 = {"hosts": [{"addr": "fd00::1", "rack": "a"}, {"addr": "fd00::2", "rack": "a"}, {"addr": "10.0.0.3"}]}
TENANT = {"match": {"exe": "trainer"}, "priority": 2, "max_mbit_per_s": 400, "yield": False}
TENANT_COMM = {"match": {"comm": "0123456789abcdef"}, "priority": 7, "yield": True, "yield_max_ms": 50}
FLOWS = {"assignment": "balance", "reserve": [{"path": 1, "min_priority": 1}]}
ACL = {"service": "conduit.test.Greeter", "method": "SayHello", "field": "account.user", "allow": ["alice", 7, True],
       "descriptor_set": "CgtncmVldGVyLnByb3Rv", "side": "both"}
RECONFIGURE = {"ring": [1, 0], "algorithm": "ring", "paths": [{"hosts": [0, 1], "path": 1}], "wait_ms": 5000}

# json: admin request bodies and policy files.
write("json", "admission", json.dumps({"deny_exe": ["bad_program", "x\u00e9\ud83d\ude00"]}))
write("json", "topology", json.dumps(TOPOLOGY, indent=2))
write("json", "tenant", json.dumps(TENANT))
write("json", "acl", json.dumps(ACL))
write("json", "reconfigure", json.dumps(RECONFIGURE))
write("json", "numbers", '[0, -1, 9007199254740993, 2.5e-3, 1E+2, -0.0, 18446744073709551615, "\\u0041\\n\\"\\\\"]')

# topology: files and PUT /v1/topology bodies.
# rpc_compression: [encoding and cap byte] + a compressed message (zlib's deflate, gzip).
import gzip as _gzip
import zlib as _zlib
_REQUEST = b"\x0a\x05alice" + b"\x12\x80\x08" + b"a" * 1024
write("rpc_compression", "deflate", bytes([0x31]) + _zlib.compress(_REQUEST))
write("rpc_compression", "gzip", bytes([0x32]) + _gzip.compress(_REQUEST, mtime=0))
write("rpc_compression", "gzip-beyond-cap", bytes([0x02]) + _gzip.compress(b"\0" * 65536, mtime=0))
write("rpc_compression", "truncated", bytes([0x32]) + _gzip.compress(_REQUEST, mtime=0)[:20])

# config_file: conduitd --config files (docs/configuration.md, packaging/conduitd.conf).
with open(os.path.join(HERE, "..", "..", "packaging", "conduitd.conf")) as f:
    write("config_file", "packaged", f.read())
write("config_file", "every-form",
      "listen = 0.0.0.0:7650\r\n\tcluster-key=/etc/conduit/cluster.key   # trailing comment\n"
      "deny-exe = a\ndeny-exe = b\nencrypt-peers = true\n\n# only a comment\nmetrics-listen = 10.0.0.5:9650")
write("config_file", "errors", "--listen = x\nno-value =\nBad = 1\njust words\n")
# daemon_settings: the same files through every setting's parser (values of each kind).
with open(os.path.join(HERE, "..", "..", "packaging", "conduitd.conf")) as f:
    write("daemon_settings", "packaged", f.read())
write("daemon_settings", "every-kind",
      "timeout-ms = 30000\nchunk-bytes = 1048576\nobject-memory-bytes = 68719476736\nencrypt-peers = true\n"
      "insecure-peers = false\ndeny-exe = /usr/bin/a\ndeny-exe = /usr/bin/b\nbusy-poll-us = 50\n"
      "log-level = debug\nadmin-mode = 0660\nallreduce-algo = rd\nflow-assignment = balance\n"
      "rpc-link-version = 2\nobject-default-access = group\nrd-max-bytes = 1048576\nrh-max-bytes = auto\n")
write("daemon_settings", "refused-values",
      "timeout-ms = -1\nchunk-bytes = 99999999999999999999999\nencrypt-peers = maybe\nlog-level = loud\n"
      "rd-max-bytes = 1M\n")
write("daemon_settings", "not-settings", "config = /etc/x\nno-such-setting = 1\n")
write("topology", "two-racks", json.dumps(TOPOLOGY, indent=2))
write("topology", "ipv6-no-links", json.dumps(TOPOLOGY_V6))
write("topology", "minimal", '{"hosts": [{"addr": "127.0.0.1"}], "version": 1}')

# policy: a kind byte (0 ring, 1 flows, 2 tenant), then the body.
write("policy", "ring", "\x00" + json.dumps({"order": "locality"}))
write("policy", "flows", "\x01" + json.dumps(FLOWS))
write("policy", "tenant-exe", "\x02" + json.dumps(TENANT))
write("policy", "tenant-comm", "\x02" + json.dumps(TENANT_COMM))


# admin_http: a byte (bit 0: the caller is the operator), then a request as conduitctl sends it.
def request(method, target, body=""):
    return ("%s %s HTTP/1.1\r\nHost: conduitd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n%s" % (method, target, len(body.encode()), body))


write("admin_http", "get-status", "\x00" + request("GET", "/v1/status"))
write("admin_http", "scrape-metrics", "\x00" + request("GET", "/metrics"))  # Prometheus, --metrics-listen
write("admin_http", "head-metrics", "\x00" + request("HEAD", "/metrics?x=1"))
write("admin_http", "get-trace", "\x00" + request("GET", "/v1/policies/tenant/a%20b?limit=5&flag&x=%2F+y"))
write("admin_http", "put-tenant", "\x01" + request("PUT", "/v1/policies/tenant/gold", json.dumps(TENANT)))
write("admin_http", "put-refused", "\x00" + request("PUT", "/v1/policies/rpc-acl/a", json.dumps(ACL)))
write("admin_http", "delete", "\x01" + request("DELETE", "/v1/policies/rpc-acl/a"))
write("admin_http", "reconfigure", "\x01" + request("POST", "/v1/communicators/0123456789abcdef/reconfigure",
                                                    json.dumps(RECONFIGURE)))
write("admin_http", "curl-reload", "\x01POST /v1/topology/reload HTTP/1.0\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n")


# field_path: proto3 messages of the harness's type M (s=1 b=2 i32=3 i64=4 u32=5 u64=6
# s32=7 s64=8 f32=9 f64=10 sf32=11 sf64=12 bo=13 e=14 inner=15).
def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def key(number, wire):
    return varint(number << 3 | wire)


def zigzag(v):
    return (v << 1) ^ (v >> 63)


def scalars(i):
    return (key(1, 2) + varint(5) + b"alice" + key(2, 2) + varint(3) + b"\x00\xff\x0a" +
            key(3, 0) + varint(-7 - i) + key(4, 0) + varint(1 << 40) + key(5, 0) + varint(4000000000) +
            key(6, 0) + varint((1 << 64) - 1) + key(7, 0) + varint(zigzag(-3)) + key(8, 0) + varint(zigzag(-(1 << 50))) +
            key(9, 5) + struct.pack("<I", 0xFFFFFFF0) + key(10, 1) + struct.pack("<Q", 1 << 63) +
            key(11, 5) + struct.pack("<i", -5) + key(12, 1) + struct.pack("<q", -6) +
            key(13, 0) + varint(1) + key(14, 0) + varint(2))


inner = scalars(1)
write("field_path", "every-field", scalars(0) + key(15, 2) + varint(len(inner)) + inner)
deeper = key(15, 2) + varint(len(inner)) + inner
write("field_path", "nested-twice", key(15, 2) + varint(len(deeper)) + deeper)
# A repeated scalar (the last wins) and a sub-message sent twice (they merge).
write("field_path", "repeated-and-merged",
      key(3, 0) + varint(1) + key(3, 0) + varint(2) + key(15, 2) + varint(7) + key(1, 2) + varint(5) + b"first" +
      key(15, 2) + varint(2) + key(5, 0) + varint(9))


# rpc_call: Call frame payloads (head, sections, inline bytes), as common/rpc_event.h lays them out.
def metadata(pairs):
    block = b""
    for k, v in pairs:
        block += struct.pack("<II", len(k), len(v)) + k + v
    return len(pairs), block


START, HEADERS, MESSAGE, HALF_CLOSE, STATUS, CANCEL, WINDOW = 1, 2, 4, 8, 16, 32, 64
INLINE = 0xFFFFFFFF


def call(call_id, sections, parts, inline=b""):
    return struct.pack("<QII", call_id, sections, len(inline)) + b"".join(parts) + inline


def start(method, authority=b"localhost:50051", peer=b"", md=(), auth=()):
    n, block = metadata(md)
    an, ablock = metadata(auth)
    auth_part = struct.pack("<I", an) + ablock if auth else b""
    return (struct.pack("<QqIIIIII", 3, 2_000_000, len(method), len(authority), len(peer), n, len(block),
                        len(auth_part)) + method + authority + peer + block + auth_part)


def message(total, offset, length, segment=INLINE, segment_offset=0):
    return struct.pack("<QQQIIQ", total, offset, length, segment, 0, segment_offset)


msg = b"\x0a\x05alice"
write("rpc_call", "unary-request", call(1, START | MESSAGE | HALF_CLOSE,
                                         [start(b"/conduit.test.Greeter/SayHello", md=[(b"x-user", b"alice")]),
                                          message(len(msg), 0, len(msg))], msg))
write("rpc_call", "tls-start-to-server", call(5, START, [start(
    b"/conduit.test.Greeter/SayHello", peer=b"ipv4:10.0.0.1:29611",
    auth=[(b"transport_security_type", b"ssl"), (b"x509_common_name", b"client"),
          (b"x509_subject_alternative_name", b"greeter-client"), (b"security_level", b"TSI_PRIVACY_AND_INTEGRITY")])]))
write("rpc_call", "shared-segment-message", call(2, MESSAGE, [message(1 << 20, 0, 1 << 20, 3, 4096)]))
n, trailers = metadata([(b"grpc-status-details-bin", b"\x00\x01"), (b"k", b"")])
n_h, headers = metadata([(b"content-type", b"application/grpc")])
write("rpc_call", "response-end", call(1, HEADERS | STATUS,
                                        [struct.pack("<II", n_h, len(headers)) + headers,
                                         struct.pack("<iIII", 5, 9, n, len(trailers)) + b"not found" + trailers]))
write("rpc_call", "cancel-and-window", call(7, CANCEL | WINDOW, [struct.pack("<iI", 1, 9) + b"cancelled",
                                                                 struct.pack("<Q", 65536)]))
frag = b"y" * 100
write("rpc_call", "link-fragment", call(9, MESSAGE, [message(1000, 200, 100)], frag))

# rpc_program: a byte (bit 1: the daemon's HelloReply, then its frame type; else bit 0:
# Hello, else OpenChannel), then the payload.
write("rpc_program", "hello", b"\x01" + struct.pack("<II64s", 4242, 1, b"greeter_server"))
write("rpc_program", "hello-full-name", b"\x01" + struct.pack("<II64s", 1, 1, b"n" * 64))
for i, target in enumerate([b"dns:///localhost:50051", b"ipv6:[::1]:443", b"10.0.0.2:7000", b"ipv4:127.0.0.1:1"]):
    write("rpc_program", "open-channel-%d" % i, b"\x00" + struct.pack("<Q256s", 10 + i, target))
write("rpc_program", "target-text", b"\x00dns:localhost:8080")

def hello_reply(result, message, accepted, timeout_ms, inline_max, flags):
    status = struct.pack("<i252s", result, message)
    return status + struct.pack("<IIII", accepted, timeout_ms, inline_max, flags)


KHELLO_REPLY = 0x0102
write("rpc_program", "hello-reply", b"\x02" + struct.pack("<H", KHELLO_REPLY) + hello_reply(0, b"", 1, 10000, 512, 1))
write("rpc_program", "hello-reply-managed-only",
      b"\x02" + struct.pack("<H", KHELLO_REPLY) + hello_reply(0, b"", 1, 30000, 4096, 0))
write("rpc_program", "hello-reply-refused",
      b"\x02" + struct.pack("<H", KHELLO_REPLY) + hello_reply(5, b"conduitd denies the program 'x'", 0, 0, 0, 0))
write("rpc_program", "hello-reply-status-only", b"\x02" + struct.pack("<H", 0) + struct.pack("<i252s", 3, b"bad"))
# OpenTlsChannel (selector bit 2) and ServeTls (bit 3): the fixed request, the counts, the
# PEM texts (not real certificates: the decoder only frames them).
PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
def open_tls(roots, key, chain, name):
    return (b"\x04" + struct.pack("<Q256s", 7, b"10.0.0.2:50051") +
            struct.pack("<IIII", len(roots), len(key), len(chain), len(name)) + roots + key + chain + name)
write("rpc_program", "open-tls-channel", open_tls(PEM, b"", b"", b"foo.test.google.fr"))
write("rpc_program", "open-tls-channel-mutual", open_tls(PEM, b"KEY", PEM, b"10.0.0.2"))
def serve_tls(mode, key, chain, roots):
    return (b"\x08" + struct.pack("<QII256s", 3, 50051, 0, b"0.0.0.0") +
            struct.pack("<IIII", mode, len(key), len(chain), len(roots)) + key + chain + roots)
write("rpc_program", "serve-tls", serve_tls(0, b"KEY", PEM, b""))
write("rpc_program", "serve-tls-require-client", serve_tls(4, b"KEY", PEM, PEM))

# upgrade_handover: a side byte (0: what the new daemon reads, 1: what the old one reads),
# then frames of protocol/upgrade_protocol.h (magic "CDTU", version 1).
def upgrade_frame(mtype, payload=b""):
    return struct.pack("<IHHII", 0x55544443, 1, mtype, len(payload), 0) + payload


def ldelim(number, data):
    return key(number, 2) + varint(len(data)) + data


def daemon_state(version, objects=()):
    doc = ldelim(1, b"PUT") + ldelim(2, b"/v1/policies/rpc-ratelimit/slow") + ldelim(3, b'{"rate": 10, "burst": 5}')
    state = (key(1, 0) + varint(version) + ldelim(2, b"conduitd 0.1.0") + ldelim(3, b"10.0.0.1:7650") +
             ldelim(4, b"/run/conduit/conduitd.sock") + ldelim(5, b"/run/conduit/admin.sock") + ldelim(10, doc))
    for oid, size, memfd, inline in objects:
        copy = (ldelim(1, oid) + key(2, 0) + varint(size) + key(3, 0) + varint(1) + key(5, 0) + varint(1000) +
                key(7, 0) + varint(1) + key(8, 0) + varint(memfd) + (ldelim(9, inline) if inline else b""))
        state += ldelim(11, copy)
    return state


STATUS_REFUSED = struct.pack("<i252s", 5, b"1 program connection(s) are open")
write("upgrade_handover", "new-state", b"\x00" + upgrade_frame(4, daemon_state(2, [(b"small", 3, 0, b"abc")])))
write("upgrade_handover", "new-state-v1", b"\x00" + upgrade_frame(4, daemon_state(1)))
write("upgrade_handover", "new-refused", b"\x00" + upgrade_frame(2, STATUS_REFUSED))
write("upgrade_handover", "new-listener-then-state",
      b"\x00" + upgrade_frame(3, struct.pack("<II", 1, 0)) + upgrade_frame(8, struct.pack("<II", 1, 0)) +
      upgrade_frame(4, daemon_state(2, [(b"big", 1 << 20, 1, b"")])))
# collective_session: a CollectiveSession (protocol/upgrade_state.proto); descriptors 1-3
# are sealed 64 KiB memfds, 4 an unsealed one, 5 a socket, 6 a pipe.
def device_buffer(buffer_id, size, fd=0, uuid=bytes(range(16)), handle=bytes(64)):
    return key(1, 0) + varint(buffer_id) + key(2, 0) + varint(size) + ldelim(3, uuid) + ldelim(4, handle) + (
        key(5, 0) + varint(fd) if fd else b"")


def host_region(region_id, size, fd):
    return key(1, 0) + varint(region_id) + key(2, 0) + varint(size) + key(3, 0) + varint(fd)


write("collective_session", "hello-only", key(1, 0) + varint(1))
write("collective_session", "segment", key(1, 0) + varint(1) + key(4, 0) + varint(65536))
write("collective_session", "segment-regions",
      key(1, 0) + varint(1) + key(4, 0) + varint(65536) + ldelim(5, host_region(7, 65536, 2)) +
      ldelim(5, host_region(8, 4096, 3)))
write("collective_session", "unsealed-region", key(4, 0) + varint(65536) + ldelim(5, host_region(7, 65536, 4)))
write("collective_session", "device-buffers",
      key(1, 0) + varint(1) + ldelim(6, device_buffer(1, 1 << 20)) + ldelim(6, device_buffer(2, 2 << 20, fd=5)))
write("collective_session", "async-error", key(1, 0) + varint(1) + key(7, 0) + varint(6) + ldelim(8, b"rank 1 died"))
write("collective_session", "reply-page", key(1, 0) + varint(1) + key(10, 0) + varint(1) + key(11, 0) + varint(7))
write("collective_session", "reply-page-and-segment",
      key(1, 0) + varint(1) + key(4, 0) + varint(65536) + key(10, 0) + varint(2) + key(11, 0) + varint(0xffffffff))
write("collective_session", "reply-page-unsealed", key(1, 0) + varint(1) + key(10, 0) + varint(4))
write("collective_session", "reply-page-socket", key(1, 0) + varint(1) + key(10, 0) + varint(5))
write("collective_session", "request-page",
      key(1, 0) + varint(1) + key(10, 0) + varint(1) + key(11, 0) + varint(3) + key(12, 0) + varint(2) +
      key(13, 0) + varint(5))
write("collective_session", "request-page-alone", key(1, 0) + varint(1) + key(12, 0) + varint(2))
write("collective_session", "request-page-same-descriptor",
      key(1, 0) + varint(1) + key(10, 0) + varint(1) + key(12, 0) + varint(1))
write("collective_session", "communicator", key(1, 0) + varint(1) + key(2, 0) + varint(0x1234) + key(3, 0) + varint(1))


HELLO = struct.pack("<II56s", 1, 2, b"conduitd 0.1.0")
write("upgrade_handover", "old-hello-ready", b"\x01" + upgrade_frame(1, HELLO) + upgrade_frame(5))
write("upgrade_handover", "old-hello-failed", b"\x01" + upgrade_frame(1, HELLO) + upgrade_frame(6, STATUS_REFUSED))


# collectives_handover: a CollectivesState (protocol/upgrade_state.proto); descriptors 1..8
# are sockets, 9 a pipe. This daemon is 10.0.0.1:29611.
def comm_key(secret):
    import hashlib
    k = int.from_bytes(hashlib.sha256(b"conduit comm key v1\0" + secret).digest()[:8], "little")
    return k or 1


def packed(number, values):
    return ldelim(number, b"".join(varint(v) for v in values))


def communicator(hosts, host_of_rank, links=(), messages=(), failed=None, secret=bytes(range(32)), extra=b""):
    ring = list(range(len(hosts)))
    c = (key(1, 0) + varint(comm_key(secret)) + ldelim(2, secret) + key(3, 0) + varint(len(host_of_rank)) +
         ldelim(4, b"train.py") + b"".join(ldelim(5, h.encode()) for h in hosts) + packed(6, host_of_rank) +
         packed(7, ring) + key(8, 0) + varint(42) + packed(10, ring) + ldelim(11, b"auto"))
    if failed:
        c += key(17, 0) + varint(failed[0]) + ldelim(18, failed[1])
    for host, coll, p2p in links:
        c += ldelim(19, key(1, 0) + varint(host) + key(2, 0) + varint(coll) + key(3, 0) + varint(-1) +
                    key(6, 0) + varint(p2p))
    for src, dst, payload in messages:
        c += ldelim(20, key(1, 0) + varint(src) + key(2, 0) + varint(dst) + ldelim(3, payload))
    return ldelim(1, c + extra)


ME, PEER, THIRD = "10.0.0.1:29611", "10.0.0.2:29611", "10.0.0.3:29611"
write("collectives_handover", "two-hosts", communicator([ME, PEER], [0, 0, 1, 1], [(1, 1, 2)], [(2, 0, b"abcd")]))
write("collectives_handover", "three-hosts-second",
      communicator([PEER, ME, THIRD], [0, 1, 2], [(0, 1, 2), (2, 3, 4)]))
write("collectives_handover", "one-host", communicator([ME], [0, 0]))
write("collectives_handover", "failed", communicator([ME, PEER], [0, 1], failed=(6, b"rank 1 exited")))
write("collectives_handover", "pipe-as-link", communicator([ME, PEER], [0, 1], [(1, 9, 2)]))
kind_totals = (key(1, 0) + varint(7) + key(2, 0) + varint(4096) + packed(3, [1] * 121) + key(4, 0) + varint(5000) +
               key(8, 0) + varint(100) + key(9, 0) + varint(100))
write("collectives_handover", "with-totals",
      communicator([ME, PEER], [0, 1], [(1, 1, 2)], extra=key(21, 0) + varint(7) + key(23, 0) + varint(1) +
                   ldelim(24, b"") + ldelim(24, kind_totals)))
# Communicators handed over at collective protocol 5 and 6 (this release's newest; on these
# 2 hosts they choose recursive doubling up to different sizes), and one at a version this
# daemon does not speak (refused at restore).
write("collectives_handover", "protocol-5", communicator([ME, PEER], [0, 1], [(1, 1, 2)], extra=key(25, 0) + varint(5)))
write("collectives_handover", "protocol-6", communicator([ME, PEER], [0, 1], [(1, 1, 2)], extra=key(25, 0) + varint(6)))
write("collectives_handover", "protocol-9", communicator([ME, PEER], [0, 1], [(1, 1, 2)], extra=key(25, 0) + varint(9)))
write("collectives_handover", "two-communicators",
      communicator([ME, PEER], [0, 1], [(1, 1, 2)]) +
      communicator([PEER, ME], [0, 1], [(0, 3, 4)], secret=bytes(range(1, 33))))


# rpc_handover: an RpcSession (protocol/upgrade_state.proto). Descriptors, by 1-based
# position: 1 the control region's memfd, 2 and 3 sealed 1 MiB memfds, 4 an unsealed one,
# 5 a socket, 6 a pipe; 0 names none.
def rpc_session(control=1, send=(), receive=(), channels=(), ports=(), held=(), read_ahead=b"", extra=b""):
    s = key(1, 0) + varint(control) if control else b""
    for seg_id, size, fd in send:
        s += ldelim(2, key(1, 0) + varint(seg_id) + key(2, 0) + varint(size) + key(3, 0) + varint(fd))
    for size, fd, blocks in receive:
        s += ldelim(3, key(1, 0) + varint(size) + key(2, 0) + varint(fd) +
                    b"".join(ldelim(3, key(1, 0) + varint(o) + key(2, 0) + varint(n)) for o, n in blocks))
    s += key(4, 0) + varint(7) + key(5, 0) + varint(3)
    for ch_id, target in channels:
        s += ldelim(6, key(1, 0) + varint(ch_id) + ldelim(2, target))
    for port, server, host in ports:
        s += ldelim(7, key(1, 0) + varint(port) + key(2, 0) + varint(server) + ldelim(3, host))
    s += key(8, 0) + varint(12)
    for typ, tag, payload, fd in held:
        s += ldelim(9, key(1, 0) + varint(typ) + key(2, 0) + varint(tag) + ldelim(3, payload) +
                    key(4, 0) + varint(fd))
    if read_ahead:
        s += ldelim(10, read_ahead)
    return s + extra


write("rpc_handover", "server", rpc_session(send=[(0, 1 << 20, 2)], receive=[(1 << 20, 3, [(0, 4096), (8192, 64)])],
                                            ports=[(50051, 1, b"0.0.0.0")]))
write("rpc_handover", "client-held-call", rpc_session(channels=[(3, b"10.0.0.2:50051")],
                                                      held=[(0x0110, 0, b"\x01" * 40, 0)], read_ahead=b"CDTS\x02"))
write("rpc_handover", "attach-held", rpc_session(held=[(0x0103, 9, b"\x00" * 16, 4)]))
write("rpc_handover", "overlapping-blocks", rpc_session(receive=[(1 << 20, 2, [(0, 4096), (64, 64)])]))
write("rpc_handover", "descriptor-twice", rpc_session(send=[(0, 1 << 20, 2), (1, 1 << 20, 2)]))
write("rpc_handover", "pipe-as-segment", rpc_session(send=[(0, 4096, 6)]))


# rpc_link_handover: an RpcLinkState (protocol/upgrade_state.proto), with RpcCallStates.
def rpc_call_state(call_key, call_id, client_end, method=b"/helloworld.Greeter/Chat", side=0, age_us=1000):
    return (key(1, 0) + varint(call_key) + key(2, 0) + varint(call_id) + key(3, 0) + varint(1 if client_end else 0) +
            ldelim(4, method) + ldelim(5, b"greeter_server[42]") + key(6, 0) + varint(side) + key(8, 0) + varint(1) +
            key(9, 0) + varint(age_us))


def rpc_link(accepted, version=3, calls=(), next_call=5, sealer=b"", opener=b"", opened=b"", unopened=b"",
             read_ahead=b"", auth=b"", auth_count=0, peer=b"10.0.0.2:7650"):
    s = key(1, 0) + varint(1) + ldelim(2, peer) + key(3, 0) + varint(1 if accepted else 0)
    s += key(4, 0) + varint(version) + key(11, 0) + varint(next_call)
    if auth:
        s += ldelim(6, auth) + key(7, 0) + varint(auth_count)
    for field, value in ((12, sealer), (13, opener), (14, opened), (15, unopened), (16, read_ahead)):
        if value:
            s += ldelim(field, value)
    return s + b"".join(ldelim(17, c) for c in calls)


CIPHER = bytes(range(32)) + bytes(range(12)) + (7).to_bytes(8, "little")
write("rpc_link_handover", "accepted-two-calls", rpc_link(True, calls=[rpc_call_state(11, 3, True, side=1),
                                                                       rpc_call_state(12, 9, True, side=1)]))
write("rpc_link_handover", "connecting-call", rpc_link(False, calls=[rpc_call_state(13, 4, False)]))
write("rpc_link_handover", "call-past-next", rpc_link(False, calls=[rpc_call_state(13, 9, False)]))
write("rpc_link_handover", "sealed", rpc_link(True, sealer=CIPHER, opener=CIPHER, opened=b"CDTS" * 4,
                                              unopened=b"\x20\x00\x00\x00abc", calls=[rpc_call_state(14, 1, True)]))
write("rpc_link_handover", "version-9", rpc_link(True, version=9))
write("rpc_link_handover", "same-call-twice", rpc_link(True, calls=[rpc_call_state(15, 1, True), rpc_call_state(15, 1, True)]))
write("rpc_link_handover", "tls-auth", rpc_link(True, auth=(4).to_bytes(4, "little") + (1).to_bytes(4, "little") + b"x509a",
                                                auth_count=1, read_ahead=b"CDTS\x03\x00"))

# rpc_program_memory: a byte (mod 3) picks the mode. 0: a release ring as a program leaves
# it (the producer's index, the consumer's, then entries {u32 segment, u32 0, u64 offset});
# 1: (u32 segment, u64 offset, u64 length) messages named in the send segments (0: 64 KiB,
# 1: 4 GiB + 1 MiB); 2: pieces of a frame stream, each a header byte (low 3 bits: how many
# descriptors ride with it, mod 5; the rest: its length - 1) and its bytes.
def ring(produced, start, entries):
    return b"\x00" + struct.pack("<QQ", produced, start) + b"".join(struct.pack("<IIQ", s, 0, o) for s, o in entries)


def sends(*records):
    return b"\x01" + b"".join(struct.pack("<IQQ", s, o, n) for s, o, n in records)


def pieces(stream, size, fds):
    out = b"\x02"
    for i in range(0, len(stream), size):
        chunk = stream[i:i + size]
        out += bytes([((len(chunk) - 1) << 3) | fds]) + chunk
    return out


SHIM_FRAME = struct.pack("<IHHII", 0x53544443, 3, 0x0101, 8, 1) + struct.pack("<II", 3, 0)
write("rpc_program_memory", "ring-three", ring(3, 0, [(0, 0), (1, 4096), (0, 8192)]))
write("rpc_program_memory", "ring-wrapped", ring(1, (1 << 64) - 2, [(2, 64), (2, 128), (2, 192)]))
write("rpc_program_memory", "ring-nonsense-index", ring(100000, 0, [(0, 0)]))
write("rpc_program_memory", "sends", sends((0, 0, 4096), (0, 65536 - 10, 10), (1, 0, (1 << 32) - 1),
                                           (1, 0, 1 << 32), (2, 0, 1), (0, 65536, 1)))
write("rpc_program_memory", "frames-with-a-descriptor", pieces(SHIM_FRAME, 24, 1))
write("rpc_program_memory", "frames-in-pieces", pieces(SHIM_FRAME * 3, 5, 0))
write("rpc_program_memory", "descriptor-flood", pieces(SHIM_FRAME, 1, 4))
