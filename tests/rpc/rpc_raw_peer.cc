// rpc_raw_peer: plays a broken daemon against a real conduitd's peer port. It opens an RPC
// link and sends one kind of malformed input, then reports what the daemon did:
//
//   rpc_raw_peer --daemon IP:PORT --case CASE [--cluster-key FILE]
//
// With the cluster's key it first authenticates as a daemon would (so the malformed input
// reaches the RPC service: what an authenticated but broken daemon could send); without it,
// the daemon must refuse it at the handshake.
//   -> "closed"                 the daemon dropped the link (what it must do with garbage)
//   -> "answered status CODE"   it answered on the call with a status (refusals)
//   -> "open"                   it neither closed nor answered within 3 s
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "common/frame.h"
#include "common/frame_stream.h"
#include "common/peer_protocol.h"
#include "common/rpc_event.h"
#include "common/rpc_protocol.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

constexpr int kWaitMs = 3000;

bool SendRaw(int fd, const std::string& bytes) {
  return WriteFull(fd, bytes.data(), bytes.size(), Deadline::AfterMs(kWaitMs)).ok();
}

std::string Header(uint16_t type, uint32_t length, uint32_t magic = peerproto::kMagic,
                   uint16_t version = peerproto::kVersion) {
  FrameHeader h{magic, version, type, length, 0};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

std::string Frame(uint16_t type, const std::string& payload) {
  return Header(type, static_cast<uint32_t>(payload.size())) + payload;
}

std::string Hello(uint32_t version) {
  rpcproto::PeerHello hello{};
  hello.rpc_version = version;
  CopyCString(hello.daemon, "rpc_raw_peer");
  return Frame(rpcproto::kPeerHello, std::string(reinterpret_cast<const char*>(&hello), sizeof(hello)));
}

// A Call frame starting a call to `port` whose message fragment is [offset, +len) of `total`.
std::string StartWithFragment(uint32_t port, uint64_t total, uint64_t offset, uint64_t len, bool start = true) {
  rpc::CallEvent ev;
  ev.call = 7;
  ev.sections = (start ? uint32_t{rpc::kStart} : 0u) | rpc::kMessage;
  ev.target = port;
  ev.method = "/conduit.test.Greeter/SayHello";
  ev.message = rpc::MessageWire{total, offset, len, rpc::kInlineSegment, 0, 0};
  std::string data(len, 'x');
  ev.data = data;
  std::string body;
  rpc::EncodeCallEvent(ev, &body);
  return Frame(rpcproto::kCall, body + data);
}

// Waits for the daemon's reaction: a status on our call, or the connection closing.
std::string Reaction(int fd) {
  FrameReader reader(fd, peerproto::kMagic, peerproto::kVersion, rpcproto::kMaxFrame, false);
  Deadline deadline = Deadline::AfterMs(kWaitMs);
  for (;;) {
    FrameHeader h;
    Status st = reader.NextHeader(&h, deadline);
    if (!st.ok()) return st.message().find("timed out") != std::string::npos ? "open" : "closed";
    std::string payload;
    if (!reader.ReadString(h.length, &payload, deadline).ok()) return "closed";
    if (h.type == rpcproto::kPeerHelloReply) {
      rpcproto::StatusReply r;
      if (payload.size() == sizeof(r)) {
        memcpy(&r, payload.data(), sizeof(r));
        if (r.status.result != 0) return "answered hello error";
      }
      continue;
    }
    if (h.type == rpcproto::kCall) {
      rpc::CallEvent ev;
      if (rpc::DecodeCallEvent(payload, &ev).ok() && ev.has(rpc::kStatus)) {
        return "answered status " + std::to_string(ev.status_code);
      }
    }
  }
}

int Main(int argc, char** argv) {
  std::string daemon, what, key_file;
  uint32_t port = 50051;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--daemon") == 0) daemon = argv[i + 1];
    else if (strcmp(argv[i], "--case") == 0) what = argv[i + 1];
    else if (strcmp(argv[i], "--port") == 0) port = static_cast<uint32_t>(atoi(argv[i + 1]));
    else if (strcmp(argv[i], "--cluster-key") == 0) key_file = argv[i + 1];
  }
  PeerSecurityOptions options;
  options.mode = key_file.empty() ? PeerMode::kInsecure : PeerMode::kClusterKey;
  options.self = "127.0.0.1:1";
  Status st = key_file.empty() ? Status::Ok() : LoadClusterKey(key_file, &options.key);
  std::unique_ptr<PeerSecurity> security;
  if (st.ok()) st = PeerSecurity::Create(options, &security);
  Conn conn;
  PeerIdentity peer;
  if (st.ok()) st = security->Dial(daemon, Deadline::AfterMs(kWaitMs), /*sealable=*/false, &conn, &peer);
  if (!st.ok()) {
    printf("cannot connect: %s\n", st.message().c_str());
    return 1;
  }
  UniqueFd fd = conn.ReleaseFd();
  std::string out;
  std::mt19937 rng(42);
  if (what == "bad_magic") {
    out = Header(rpcproto::kPeerHello, 72, 0xdeadbeef) + std::string(72, 'z');
  } else if (what == "bad_version") {
    out = Hello(99);
  } else {
    out = Hello(rpcproto::kRpcVersion);
    if (what == "garbage_call") {
      std::string junk(200, '\0');
      for (char& c : junk) c = static_cast<char>(rng());
      out += Frame(rpcproto::kCall, junk);
    } else if (what == "unknown_type") {
      out += Frame(0x01ff, "hello?");
    } else if (what == "oversized") {
      out += Header(rpcproto::kCall, 0xffffff00u);
    } else if (what == "inline_overrun") {
      rpc::CallHead head{7, rpc::kMessage, 1u << 20};
      out += Frame(rpcproto::kCall, std::string(reinterpret_cast<const char*>(&head), sizeof(head)));
    } else if (what == "fragment_gap") {
      out += StartWithFragment(port, 1000, 0, 100) + StartWithFragment(port, 1000, 500, 100, /*start=*/false);
    } else if (what == "fragment_past_end") {
      out += StartWithFragment(port, 100, 50, 100);
    } else if (what == "unknown_port") {
      out += StartWithFragment(1, 10, 0, 10);
    } else if (what == "truncated") {
      std::string whole = StartWithFragment(port, 1000, 0, 1000);
      out += whole.substr(0, whole.size() / 2);
    } else {
      printf("unknown case %s\n", what.c_str());
      return 2;
    }
  }
  if (!SendRaw(fd.get(), out)) {
    printf("closed\n");
    return 0;
  }
  if (what == "truncated") shutdown(fd.get(), SHUT_WR);
  printf("%s\n", Reaction(fd.get()).c_str());
  return 0;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
