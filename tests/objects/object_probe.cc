// objects_probe: a program that speaks the object protocol by hand, run by the security
// tests as another (unprivileged) user, to try what a hostile local program would.
//
//   objects_probe try-write SOCKET ID [--copying]
//       Gets ID (read-only, or copying: the descriptor then arrives before the object is
//       complete) and tries every way to write through the descriptor it is handed: a
//       writable shared mapping, mprotect of a read-only one, write(2), reopening it
//       read-write through /proc/self/fd, fchmod. Prints one line per attempt and
//       "seals=0x.." ; exits 0 when every attempt failed, 1 when one succeeded, 2 on error.
//   objects_probe hello SOCKET CLAIMED_EXE
//       Says Hello claiming to be CLAIMED_EXE; prints "admitted" or "refused: <message>".
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/fd_io.h"
#include "common/frame.h"
#include "protocol/object_protocol.h"
#include "protocol/shim_protocol.h"

namespace {

namespace op = conduit::objproto;
using conduit::Deadline;
using conduit::Frame;
using conduit::UniqueFd;

UniqueFd Connect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  return fd;
}

// Sends one request and reads one reply; the reply's status code (-1 on I/O failure).
int Call(int fd, uint16_t type, const void* body, size_t len, Frame* reply, std::string* message) {
  conduit::Status st = conduit::WriteFrame(fd, conduit::shimproto::kMagic, conduit::shimproto::kVersion, type, 0, body,
                                           static_cast<uint32_t>(len), Deadline::AfterMs(10000));
  if (st.ok()) {
    st = conduit::ReadFrame(fd, conduit::shimproto::kMagic, conduit::shimproto::kVersion, op::kMaxPayload, reply,
                            Deadline::AfterMs(20000), /*accept_fd=*/true);
  }
  if (!st.ok() || reply->payload.size() < sizeof(op::Status)) {
    *message = st.ok() ? "short reply" : st.message();
    return -1;
  }
  op::Status w;
  memcpy(&w, reply->payload.data(), sizeof(w));
  *message = conduit::FromCString(w.message);
  return w.code;
}

int Hello(int fd, const char* exe, std::string* message) {
  op::HelloRequest hello{};
  hello.pid = 1;  // a lie, like the name: the daemon must not care
  hello.version = op::kVersion;
  conduit::CopyCString(hello.exe, exe);
  Frame reply;
  return Call(fd, op::kHello, &hello, sizeof(hello), &reply, message);
}

// One attempt: prints it and whether it worked (it should not have).
bool Attempt(const char* what, bool worked, int err) {
  printf("%s: %s\n", what, worked ? "SUCCEEDED" : strerror(err));
  return worked;
}

int TryWrite(const std::string& socket_path, const std::string& id, bool copying) {
  UniqueFd fd = Connect(socket_path);
  std::string msg;
  if (!fd.valid() || Hello(fd.get(), "objects_probe", &msg) != 0) {
    printf("error: hello: %s\n", msg.c_str());
    return 2;
  }
  op::GetRequest get{};
  get.id.len = static_cast<uint8_t>(id.size());
  memcpy(get.id.bytes, id.data(), id.size());
  get.timeout_ms = 10000;
  get.flags = copying ? 0u : static_cast<uint32_t>(op::kGetReadOnly);
  Frame reply;
  int code = Call(fd.get(), op::kGet, &get, sizeof(get), &reply, &msg);
  if (code != 0 || !reply.fd.valid() || reply.payload.size() < sizeof(op::GetReply)) {
    printf("error: get %d: %s%s\n", code, msg.c_str(), reply.fd.valid() ? "" : " (no descriptor)");
    return 2;
  }
  op::GetReply r;
  memcpy(&r, reply.payload.data(), sizeof(r));
  const int ofd = reply.fd.get();
  const size_t size = r.size;
  printf("size=%zu ready=%llu seals=0x%x\n", size, static_cast<unsigned long long>(r.ready), fcntl(ofd, F_GET_SEALS));
  bool any = false;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, ofd, 0);
  any |= Attempt("mmap-shared-write", p != MAP_FAILED, errno);
  p = mmap(nullptr, size, PROT_READ, MAP_SHARED, ofd, 0);
  if (p == MAP_FAILED) {
    printf("error: read-only mmap: %s\n", strerror(errno));
    return 2;
  }
  bool worked = mprotect(p, size, PROT_READ | PROT_WRITE) == 0;
  any |= Attempt("mprotect-write", worked, errno);
  worked = pwrite(ofd, "x", 1, 0) == 1;
  any |= Attempt("pwrite", worked, errno);
  worked = fchmod(ofd, 0666) == 0;
  any |= Attempt("fchmod", worked, errno);
  std::string self = "/proc/self/fd/" + std::to_string(ofd);
  UniqueFd rw(open(self.c_str(), O_RDWR | O_CLOEXEC));
  if (!rw.valid()) {
    Attempt("reopen-rw", false, errno);
  } else {
    // Reopened: it still must not write.
    printf("reopen-rw: opened\n");
    worked = pwrite(rw.get(), "x", 1, 0) == 1;
    any |= Attempt("reopen-rw pwrite", worked, errno);
    void* w = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, rw.get(), 0);
    any |= Attempt("reopen-rw mmap-shared-write", w != MAP_FAILED, errno);
  }
  return any ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string verb = argc > 1 ? argv[1] : "";
  if (verb == "try-write" && (argc == 4 || argc == 5)) {
    return TryWrite(argv[2], argv[3], argc == 5 && std::string(argv[4]) == "--copying");
  }
  if (verb == "hello" && argc == 4) {
    UniqueFd fd = Connect(argv[2]);
    std::string msg;
    int code = fd.valid() ? Hello(fd.get(), argv[3], &msg) : -1;
    if (code == 0) {
      printf("admitted\n");
    } else {
      printf("refused: %d %s\n", code, msg.c_str());
    }
    return 0;
  }
  fprintf(stderr, "usage: objects_probe try-write SOCKET ID [--copying] | hello SOCKET CLAIMED_EXE\n");
  return 2;
}
