// rpc_raw_program: plays a hostile gRPC program against a real conduitd's RPC service, on
// the Unix socket $CONDUIT_SOCKET, speaking the shim protocol from the daemon's own
// headers (as libmrpc-grpc would, but saying what it likes). It says Hello, then sends one
// kind of bad input and reports what the daemon did:
//
//   rpc_raw_program --case CASE [--exe NAME] [--wait-ms N]
//
//   hello            Hello claiming the executable NAME -> "accepted" / "refused: why"
//   partial_header   half a frame header, then silence  -> "closed after N ms" / "open"
//   header_silence   a Call header announcing 1000 bytes, 10 of them, then silence
//   huge_frame       a Call header announcing the largest frame, 1 KiB of it, "holding",
//                    then silence (the daemon must not reserve what was only announced)
//   channels         opens channels to --target until one is refused ("opened N",
//                    "refused: why"), closes one (CloseChannel) and opens another
//                    ("after close: managed" / "after close: refused: why")
//   fd_flood         a CloseChannel frame sent a byte at a time, each byte with 4
//                    descriptors, "holding", then what the daemon did ("closed after N ms"
//                    / "open"): descriptors no frame takes must not pile up in the daemon
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/fd_io.h"
#include "common/frame.h"
#include "common/frame_stream.h"
#include "common/shm_segment.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"

namespace conduit {
namespace {

using Clock = std::chrono::steady_clock;

std::string Header(uint16_t type, uint32_t length) {
  FrameHeader h{shimproto::kMagic, shimproto::kVersion, type, length, 0};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

bool SendRaw(int fd, const std::string& bytes) {
  return WriteFull(fd, bytes.data(), bytes.size(), Deadline::AfterMs(3000)).ok();
}

// Says Hello as `exe`; "" when accepted, else why not.
std::string Hello(int fd, const std::string& exe) {
  ShmSegment control;
  UniqueFd control_fd;
  Status st = control.Create("rpc-raw-control", rpcproto::kControlRegionBytes, &control_fd);
  if (!st.ok()) return "cannot create the control region: " + st.message();
  rpcproto::HelloRequest hello{};
  hello.pid = 1;  // a lie too: the daemon asks the kernel
  hello.version = rpcproto::kRpcVersion;
  CopyCString(hello.exe, exe.c_str());
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&hello), sizeof(hello));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kHello, 1, sizeof(hello));
  f.fd = std::move(control_fd);
  FrameWriter writer(fd, 3000);
  st = writer.Send(std::move(f));
  if (!st.ok()) return "cannot send Hello: " + st.message();
  FrameReader reader(fd, shimproto::kMagic, shimproto::kVersion, rpcproto::kMaxFrame, /*accept_fds=*/true);
  FrameHeader h;
  std::string payload;
  Deadline deadline = Deadline::AfterMs(5000);
  st = reader.NextHeader(&h, deadline);
  if (st.ok()) st = reader.ReadString(h.length, &payload, deadline);
  if (!st.ok()) return "no HelloReply: " + st.message();
  rpcproto::HelloReply reply;
  if (h.type != rpcproto::kHelloReply || payload.size() != sizeof(reply)) return "unexpected reply";
  memcpy(&reply, payload.data(), sizeof(reply));
  if (reply.accepted == 0) return FromWire(reply.status).message();
  return "";
}

// Opens channel `id` to `target`; "" when managed, else why not.
std::string OpenChannel(FrameWriter& writer, FrameReader& reader, uint64_t id, const std::string& target) {
  rpcproto::OpenChannelRequest req{};
  req.channel = id;
  CopyCString(req.target, target.c_str());
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&req), sizeof(req));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kOpenChannel, 2, sizeof(req));
  if (!writer.Send(std::move(f)).ok()) return "cannot send OpenChannel";
  FrameHeader h;
  std::string payload;
  Deadline deadline = Deadline::AfterMs(5000);
  Status st = reader.NextHeader(&h, deadline);
  if (st.ok()) st = reader.ReadString(h.length, &payload, deadline);
  rpcproto::OpenChannelReply reply;
  if (!st.ok() || h.type != rpcproto::kOpenChannelReply || payload.size() != sizeof(reply)) return "no reply";
  memcpy(&reply, payload.data(), sizeof(reply));
  return reply.managed != 0 ? "" : FromWire(reply.status).message();
}

int Channels(int fd, const std::string& target) {
  FrameWriter writer(fd, 3000);
  FrameReader reader(fd, shimproto::kMagic, shimproto::kVersion, rpcproto::kMaxFrame, /*accept_fds=*/true);
  uint64_t id = 1;
  std::string why;
  for (; id <= 1000000 && why.empty(); ++id) why = OpenChannel(writer, reader, id, target);
  printf("opened %llu\nrefused: %s\n", static_cast<unsigned long long>(id - 2), why.c_str());
  rpcproto::CloseChannelRequest close{1};
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&close), sizeof(close));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kCloseChannel, 0, sizeof(close));
  if (!writer.Send(std::move(f)).ok()) return 1;
  why = OpenChannel(writer, reader, id, target);
  printf("after close: %s\n", why.empty() ? "managed" : ("refused: " + why).c_str());
  return 0;
}

// Sends `bytes` one byte per sendmsg, each with 4 descriptors (of /dev/null) attached;
// false once the daemon has closed the connection.
bool SendBytesWithDescriptors(int fd, const std::string& bytes) {
  UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd.valid()) return false;
  for (char byte : bytes) {
    const int fds[4] = {null_fd.get(), null_fd.get(), null_fd.get(), null_fd.get()};
    FdControl control;
    iovec iov{&byte, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    AttachFds(&msg, &control, fds, 4);
    if (sendmsg(fd, &msg, MSG_NOSIGNAL) != 1) return false;
    usleep(1000);  // each byte its own message on the daemon's side
  }
  return true;
}

// Waits until the daemon closes the connection (whatever it sends first is drained).
std::string WaitForClose(int fd, int wait_ms, Clock::time_point since) {
  char buf[4096];
  auto end = Clock::now() + std::chrono::milliseconds(wait_ms);
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (poll(&p, 1, left > 0 ? left : 0) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
      return "closed after " + std::to_string(ms) + " ms";
    }
  }
  return "open";
}

int Main(int argc, char** argv) {
  std::string what, exe = "rpc_raw_program", target;
  int wait_ms = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--case") == 0) what = argv[i + 1];
    else if (strcmp(argv[i], "--exe") == 0) exe = argv[i + 1];
    else if (strcmp(argv[i], "--wait-ms") == 0) wait_ms = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--target") == 0) target = argv[i + 1];
  }
  const char* path = getenv(shimproto::kSocketEnv);
  if (path == nullptr) path = shimproto::kDefaultSocketPath;
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
  if (!fd.valid() || connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    printf("cannot connect to %s: %s\n", path, strerror(errno));
    return 1;
  }
  std::string refused = Hello(fd.get(), exe);
  if (what == "hello") {
    printf("%s\n", refused.empty() ? "accepted" : ("refused: " + refused).c_str());
    return 0;
  }
  if (!refused.empty()) {
    printf("refused: %s\n", refused.c_str());
    return 1;
  }
  if (what == "channels") return Channels(fd.get(), target);
  if (what == "fd_flood") {
    rpcproto::CloseChannelRequest close{12345};
    const std::string frame = Header(rpcproto::kCloseChannel, sizeof(close)) +
                              std::string(reinterpret_cast<const char*>(&close), sizeof(close));
    auto sent = Clock::now();
    printf("%s\n", SendBytesWithDescriptors(fd.get(), frame) ? "holding" : "closed while sending");
    fflush(stdout);
    printf("%s\n", WaitForClose(fd.get(), wait_ms, sent).c_str());
    return 0;
  }
  std::string out;
  if (what == "partial_header") {
    out = Header(rpcproto::kCall, 100).substr(0, 8);
  } else if (what == "header_silence") {
    out = Header(rpcproto::kCall, 1000) + std::string(10, 'x');
  } else if (what == "huge_frame") {
    out = Header(rpcproto::kCall, rpcproto::kMaxFrame) + std::string(1024, 'x');
  } else {
    printf("unknown case %s\n", what.c_str());
    return 2;
  }
  if (!SendRaw(fd.get(), out)) {
    printf("closed while sending\n");
    return 0;
  }
  auto sent = Clock::now();
  printf("holding\n");
  fflush(stdout);
  printf("%s\n", WaitForClose(fd.get(), wait_ms, sent).c_str());
  return 0;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
