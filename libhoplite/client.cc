// hoplite::Client over the program socket: requests and replies in the object protocol,
// object bytes through memfds the daemon passes with SCM_RIGHTS.
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "common/busy_poll.h"
#include "common/exe_name.h"
#include "common/fd_io.h"
#include "common/frame.h"
#include "conduit/hoplite.h"
#include "protocol/object_protocol.h"
#include "protocol/shim_protocol.h"

namespace hoplite {
namespace {

namespace op = conduit::objproto;
using conduit::Deadline;
using conduit::Frame;
using conduit::UniqueFd;

// Beyond the daemon's own bound: a live daemon always answers before this.
constexpr int kReplySlackMs = 30000;

// A writable mapping of a Put's memfd that a forked child inherits lives on in the child
// until it execs, and the daemon's seal (F_SEAL_WRITE) refuses the Put while it does.
// madvise(MADV_DONTFORK) keeps it out of children, but only from the moment it is made: a
// fork in between is held back by this lock, taken in a pthread_atfork handler.
std::mutex& ForkGuard() {
  static std::mutex* mu = [] {
    auto* m = new std::mutex;  // never destroyed: a fork may come during exit
    pthread_atfork([] { ForkGuard().lock(); }, [] { ForkGuard().unlock(); }, [] { ForkGuard().unlock(); });
    return m;
  }();
  return *mu;
}

// Maps a Put's memfd writable, never into a child forked by another thread.
void* MapForPut(int fd, size_t size) {
  std::lock_guard<std::mutex> no_fork(ForkGuard());
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p != MAP_FAILED) (void)madvise(p, size, MADV_DONTFORK);
  return p;
}

Status Wrap(const conduit::Status& st, const char* what) {
  return Status(Code::kUnavailable, std::string("lost contact with conduitd while ") + what + ": " + st.message());
}

Status FromWire(const op::Status& w) {
  if (w.code < 0 || w.code > op::kLastCode) return Status(Code::kInternal, "daemon sent an unknown status code");
  return Status(static_cast<Code>(w.code), conduit::FromCString(w.message));
}

op::Id IdToWire(const std::string& id) {
  op::Id w{};
  w.len = static_cast<uint8_t>(id.size());
  memcpy(w.bytes, id.data(), id.size());
  return w;
}

Status CheckId(const std::string& id) {
  if (id.empty() || id.size() > op::kMaxIdBytes) {
    return Status(Code::kInvalid, "object ids are 1.." + std::to_string(op::kMaxIdBytes) + " bytes");
  }
  return Status();
}

// Checks every id, then the list's length against the protocol's limit.
Status CheckIds(const std::vector<std::string>& ids, const char* what) {
  for (const auto& id : ids) {
    Status st = CheckId(id);
    if (!st.ok()) return st;
  }
  if (ids.size() > op::kMaxSources) return Status(Code::kInvalid, std::string("too many ") + what + " ids");
  return Status();
}

std::vector<op::Id> IdsToWire(const std::vector<std::string>& ids) {
  std::vector<op::Id> wire;
  for (const auto& id : ids) wire.push_back(IdToWire(id));
  return wire;
}

// Reduce and Wait replies: a head R, then `head.*count` uint32 indices into the request's
// ids (the sources used, the objects ready). Fills *head and *indices (when not null).
template <typename R>
Status ParseIndexedReply(const Frame& f, const char* what, uint32_t R::*count, R* head, std::vector<size_t>* indices) {
  if (f.payload.size() < sizeof(R)) return Status(Code::kInternal, std::string("short ") + what + " reply");
  memcpy(head, f.payload.data(), sizeof(R));
  if (f.payload.size() != sizeof(R) + size_t{head->*count} * sizeof(uint32_t)) {
    return Status(Code::kInternal, std::string("bad ") + what + " reply");
  }
  if (indices != nullptr) {
    indices->clear();
    for (uint32_t i = 0; i < head->*count; ++i) {
      uint32_t v;
      memcpy(&v, f.payload.data() + sizeof(R) + i * sizeof(v), sizeof(v));
      indices->push_back(v);
    }
  }
  return Status();
}

template <typename T>
std::vector<uint8_t> Body(const T& head, const void* tail = nullptr, size_t n = 0) {
  std::vector<uint8_t> b(sizeof(T) + n);
  memcpy(b.data(), &head, sizeof(T));
  if (n > 0) memcpy(b.data() + sizeof(T), tail, n);
  return b;
}

// A read-only mapping of a store memfd.
class MappedView : public ObjectView {
 public:
  MappedView(const uint8_t* data, size_t size, std::function<void()> release)
      : data_(data), size_(size), release_(std::move(release)) {}
  ~MappedView() override {
    munmap(const_cast<uint8_t*>(data_), size_);
    if (release_) release_();
  }
  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  std::function<void()> release_;
};

class HeapView : public ObjectView {
 public:
  explicit HeapView(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  const uint8_t* data() const override { return bytes_.data(); }
  size_t size() const override { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

// The connection; shared with views so their release can still reach the daemon.
struct Connection {
  std::mutex mu;
  UniqueFd fd;
  uint32_t timeout_ms = 300000;
  size_t block = 1 << 20;

  Deadline ReplyDeadline(int timeout_ms) const {
    return Deadline::AfterMs(static_cast<int64_t>(std::max<int64_t>(timeout_ms, this->timeout_ms)) + kReplySlackMs);
  }
  conduit::Status Send(uint16_t type, const std::vector<uint8_t>& body, int timeout_ms = 0) {
    return conduit::WriteFrame(fd.get(), conduit::shimproto::kMagic, conduit::shimproto::kVersion, type, 0,
                               body.data(), static_cast<uint32_t>(body.size()), ReplyDeadline(timeout_ms));
  }
  // Reads one frame of `type` (a status-only frame of type 0 means the daemon refused us).
  Status Read(uint16_t type, Frame* f, int timeout_ms, const char* what, bool accept_fd = false) {
    // Most object calls wait for other daemons (a Get's directory call and fetch, a
    // Reduce's reservation and sources): their replies come after a round trip between
    // daemons, which the NCCL shim's 50 us seldom covers, so they spin for the peer budget
    // (common/busy_poll.h; measured: docs/benchmarks.md, "Directory answers without a
    // wake-up"). A reply within it costs this thread no wake-up.
    conduit::SpinUntilReady(fd.get(), POLLIN, conduit::ClientPeerBusyPollMicros());
    conduit::Status st = conduit::ReadFrame(fd.get(), conduit::shimproto::kMagic, conduit::shimproto::kVersion,
                                            op::kMaxPayload + 4096, f, ReplyDeadline(timeout_ms), accept_fd);
    if (!st.ok()) return Wrap(st, what);
    if (f->header.type != type || f->payload.size() < sizeof(op::Status)) {
      if (f->payload.size() >= sizeof(op::Status)) {
        op::Status w;
        memcpy(&w, f->payload.data(), sizeof(w));
        Status s = FromWire(w);
        if (!s.ok()) return s;
      }
      return Status(Code::kInternal, std::string("unexpected reply while ") + what);
    }
    return Status();
  }
};

class DaemonClient : public Client {
 public:
  explicit DaemonClient(std::shared_ptr<Connection> c) : c_(std::move(c)) {}

  Status Put(const std::string& id, const void* data, size_t size, Access access) override;
  Status Get(const std::string& id, const std::function<void*(size_t)>& alloc, int timeout_ms) override;
  Status GetReadOnly(const std::string& id, std::shared_ptr<const ObjectView>* out, int timeout_ms) override;
  Status Delete(const std::string& id) override;
  Status Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects, ReduceOp op,
                DataType dtype, int timeout_ms, std::vector<size_t>* used, Access access) override;
  Status Wait(const std::vector<std::string>& ids, size_t num_ready, int timeout_ms,
              std::vector<size_t>* ready) override;
  Status State(std::string* json) override;

 private:
  // Sends a Get with `flags` and reads its reply (with c_->mu held): `*r` and, in `*f`, the
  // object's bytes inline or its descriptor.
  Status AskGet(const std::string& id, uint32_t flags, int timeout_ms, Frame* f, op::GetReply* r);

  std::shared_ptr<Connection> c_;
};

Status CheckAccess(Access access) {
  if (static_cast<int>(access) < 0 || static_cast<int>(access) > static_cast<int>(op::kAccessWorld)) {
    return Status(Code::kInvalid, "unknown object access " + std::to_string(static_cast<int>(access)));
  }
  return Status();
}

Status DaemonClient::Put(const std::string& id, const void* data, size_t size, Access access) {
  Status st = CheckId(id);
  if (st.ok()) st = CheckAccess(access);
  if (!st.ok()) return st;
  if (size > 0 && data == nullptr) return Status(Code::kInvalid, "Put of null data");
  std::lock_guard<std::mutex> lock(c_->mu);
  op::PutRequest req{};
  req.id = IdToWire(id);
  req.size = size;
  req.access = static_cast<uint32_t>(access);
  const bool small = size < op::kInlineLimit;
  conduit::Status w = c_->Send(op::kPut, Body(req, data, small ? size : 0));
  if (!w.ok()) return Wrap(w, "sending Put");
  Frame f;
  st = c_->Read(op::kPutReply, &f, 0, "waiting for Put", /*accept_fd=*/true);
  if (!st.ok()) return st;
  op::Status ws;
  memcpy(&ws, f.payload.data(), sizeof(ws));
  st = FromWire(ws);
  if (!st.ok() || small) return st;
  if (!f.fd.valid()) return Status(Code::kInternal, "daemon sent no shared memory for Put");
  void* p = MapForPut(f.fd.get(), size);
  if (p == MAP_FAILED) return Status(Code::kInternal, std::string("mmap for Put: ") + strerror(errno));
  // Copy block by block and tell the daemon after each: receivers may already read them.
  // The mapping goes before the last report: the daemon seals the object against writes
  // then, which the kernel refuses while a writable mapping of it exists.
  const uint8_t* src = static_cast<const uint8_t*>(data);
  uint8_t* dst = static_cast<uint8_t*>(p);
  for (size_t off = 0; off < size;) {
    size_t n = std::min(c_->block, size - off);
    memcpy(dst + off, src + off, n);
    off += n;
    if (off == size) munmap(p, size);
    op::Progress prog{off};
    w = c_->Send(op::kPutProgress, Body(prog));
    if (!w.ok()) {
      if (off < size) munmap(p, size);
      break;
    }
  }
  if (!w.ok()) return Wrap(w, "copying into Put");
  st = c_->Read(op::kPutDone, &f, 0, "finishing Put");
  if (!st.ok()) return st;
  memcpy(&ws, f.payload.data(), sizeof(ws));
  return FromWire(ws);
}

Status DaemonClient::AskGet(const std::string& id, uint32_t flags, int timeout_ms, Frame* f, op::GetReply* r) {
  op::GetRequest req{};
  req.id = IdToWire(id);
  req.timeout_ms = static_cast<uint32_t>(std::max(timeout_ms, 0));
  req.flags = flags;
  conduit::Status w = c_->Send(op::kGet, Body(req), timeout_ms);
  if (!w.ok()) return Wrap(w, "sending Get");
  Status st = c_->Read(op::kGetReply, f, timeout_ms, "waiting for Get", /*accept_fd=*/true);
  if (!st.ok()) return st;
  if (f->payload.size() < sizeof(*r)) return Status(Code::kInternal, "short Get reply");
  memcpy(r, f->payload.data(), sizeof(*r));
  return FromWire(r->status);
}

Status DaemonClient::Get(const std::string& id, const std::function<void*(size_t)>& alloc, int timeout_ms) {
  Status st = CheckId(id);
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(c_->mu);
  Frame f;
  op::GetReply r{};
  st = AskGet(id, 0, timeout_ms, &f, &r);
  if (!st.ok()) return st;
  uint8_t* dst = static_cast<uint8_t*>(alloc(r.size));
  if (dst == nullptr && r.size > 0) return Status(Code::kInvalid, "Get: no buffer for the object");
  if (!f.fd.valid()) {
    if (f.payload.size() != sizeof(r) + r.size) return Status(Code::kInternal, "Get reply size mismatch");
    if (r.size > 0) memcpy(dst, f.payload.data() + sizeof(r), r.size);
    return Status();
  }
  void* p = mmap(nullptr, r.size, PROT_READ, MAP_SHARED, f.fd.get(), 0);
  if (p == MAP_FAILED) return Status(Code::kInternal, std::string("mmap for Get: ") + strerror(errno));
  const uint8_t* src = static_cast<const uint8_t*>(p);
  uint64_t copied = 0;
  uint64_t ready = r.ready;
  for (;;) {
    if (ready > copied) {
      memcpy(dst + copied, src + copied, ready - copied);
      copied = ready;
    }
    if (copied >= r.size) break;
    Frame pf;
    st = c_->Read(op::kGetProgress, &pf, timeout_ms, "receiving the object");
    if (!st.ok()) break;
    op::GetProgress prog{};
    if (pf.payload.size() != sizeof(prog)) {
      st = Status(Code::kInternal, "malformed Get progress");
      break;
    }
    memcpy(&prog, pf.payload.data(), sizeof(prog));
    st = FromWire(prog.status);
    if (!st.ok()) break;
    ready = std::min<uint64_t>(prog.ready, r.size);
  }
  munmap(p, r.size);
  return st;
}

Status DaemonClient::GetReadOnly(const std::string& id, std::shared_ptr<const ObjectView>* out, int timeout_ms) {
  Status st = CheckId(id);
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(c_->mu);
  Frame f;
  op::GetReply r{};
  st = AskGet(id, op::kGetReadOnly, timeout_ms, &f, &r);
  if (!st.ok()) return st;
  if (!f.fd.valid()) {
    if (f.payload.size() != sizeof(r) + r.size) return Status(Code::kInternal, "Get reply size mismatch");
    *out = std::make_shared<HeapView>(std::vector<uint8_t>(f.payload.begin() + sizeof(r), f.payload.end()));
    return Status();
  }
  void* p = mmap(nullptr, r.size, PROT_READ, MAP_SHARED, f.fd.get(), 0);
  if (p == MAP_FAILED) return Status(Code::kInternal, std::string("mmap for Get: ") + strerror(errno));
  std::weak_ptr<Connection> conn = c_;
  *out = std::make_shared<MappedView>(static_cast<const uint8_t*>(p), r.size, [conn, id] {
    // Lets the daemon evict the copy again (it also forgets views when we disconnect).
    if (auto c = conn.lock()) {
      std::lock_guard<std::mutex> l(c->mu);
      (void)c->Send(op::kRelease, Body(IdToWire(id)));
    }
  });
  return Status();
}

Status DaemonClient::Delete(const std::string& id) {
  Status st = CheckId(id);
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(c_->mu);
  conduit::Status w = c_->Send(op::kDelete, Body(IdToWire(id)));
  if (!w.ok()) return Wrap(w, "sending Delete");
  Frame f;
  st = c_->Read(op::kDeleteReply, &f, 0, "waiting for Delete");
  if (!st.ok()) return st;
  op::Status ws;
  memcpy(&ws, f.payload.data(), sizeof(ws));
  return FromWire(ws);
}

Status DaemonClient::Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                            ReduceOp rop, DataType dtype, int timeout_ms, std::vector<size_t>* used, Access access) {
  Status st = CheckId(target);
  if (st.ok()) st = CheckIds(sources, "Reduce source");
  if (st.ok()) st = CheckAccess(access);
  if (!st.ok()) return st;
  op::ReduceRequest req{};
  req.target = IdToWire(target);
  req.op = static_cast<uint32_t>(rop);
  req.dtype = static_cast<uint32_t>(dtype);
  req.num_objects = static_cast<uint32_t>(num_objects);
  req.nsources = static_cast<uint32_t>(sources.size());
  req.timeout_ms = static_cast<uint32_t>(std::max(timeout_ms, 0));
  req.access = static_cast<uint32_t>(access);
  std::vector<op::Id> ids = IdsToWire(sources);
  std::lock_guard<std::mutex> lock(c_->mu);
  conduit::Status w = c_->Send(op::kReduce, Body(req, ids.data(), ids.size() * sizeof(op::Id)), timeout_ms);
  if (!w.ok()) return Wrap(w, "sending Reduce");
  Frame f;
  st = c_->Read(op::kReduceReply, &f, timeout_ms, "waiting for Reduce");
  if (!st.ok()) return st;
  op::ReduceReply r{};
  st = ParseIndexedReply(f, "Reduce", &op::ReduceReply::nused, &r, used);
  return st.ok() ? FromWire(r.status) : st;
}

Status DaemonClient::Wait(const std::vector<std::string>& ids, size_t num_ready, int timeout_ms,
                          std::vector<size_t>* ready) {
  Status st = CheckIds(ids, "Wait");
  if (!st.ok()) return st;
  if (ids.empty()) return Status(Code::kInvalid, "Wait needs at least one id");
  op::WaitRequest req{};
  req.timeout_ms = static_cast<uint32_t>(std::max(timeout_ms, 0));
  req.num_ready = static_cast<uint32_t>(num_ready);
  req.n = static_cast<uint32_t>(ids.size());
  std::vector<op::Id> wire = IdsToWire(ids);
  std::lock_guard<std::mutex> lock(c_->mu);
  conduit::Status w = c_->Send(op::kWait, Body(req, wire.data(), wire.size() * sizeof(op::Id)), timeout_ms);
  if (!w.ok()) return Wrap(w, "sending Wait");
  Frame f;
  st = c_->Read(op::kWaitReply, &f, timeout_ms, "waiting for objects");
  if (!st.ok()) return st;
  op::WaitReply r{};
  st = ParseIndexedReply(f, "Wait", &op::WaitReply::nready, &r, ready);
  return st.ok() ? FromWire(r.status) : st;
}

Status DaemonClient::State(std::string* json) {
  std::lock_guard<std::mutex> lock(c_->mu);
  conduit::Status w = c_->Send(op::kState, {});
  if (!w.ok()) return Wrap(w, "sending State");
  Frame f;
  Status st = c_->Read(op::kStateReply, &f, 0, "waiting for State");
  if (!st.ok()) return st;
  json->assign(f.payload.begin() + sizeof(op::Status), f.payload.end());
  return Status();
}

}  // namespace

std::string Status::ToString() const {
  static const char* kNames[] = {"OK", "TIMEOUT", "NOT_FOUND", "EXISTS", "OUT_OF_MEMORY", "INVALID", "LOST",
                                 "UNAVAILABLE", "RETRY", "INTERNAL", "REFUSED", "PERMISSION_DENIED", "OVER_QUOTA"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == op::kLastCode + 1);
  int c = static_cast<int>(code_);
  std::string name = c >= 0 && c <= op::kLastCode ? kNames[c] : "UNKNOWN";
  return ok() ? name : name + ": " + message_;
}

Status Client::Get(const std::string& id, std::vector<uint8_t>* out, int timeout_ms) {
  return Get(
      id,
      [out](size_t size) -> void* {
        out->resize(size);
        return out->data();
      },
      timeout_ms);
}

Status Client::WaitAny(const std::vector<std::string>& ids, int timeout_ms, size_t* index) {
  std::vector<size_t> ready;
  Status st = Wait(ids, 1, timeout_ms, &ready);
  if (st.ok() && !ready.empty()) *index = ready[0];
  return st;
}

Status Client::Connect(std::unique_ptr<Client>* out, const std::string& socket_path) {
  std::string path = socket_path;
  if (path.empty()) {
    const char* env = getenv(conduit::shimproto::kSocketEnv);
    path = env != nullptr && *env != '\0' ? env : conduit::shimproto::kDefaultSocketPath;
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return Status(Code::kInvalid, "socket path too long: " + path);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size());
  auto c = std::make_shared<Connection>();
  c->fd.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!c->fd.valid()) return Status(Code::kUnavailable, std::string("socket: ") + strerror(errno));
  if (connect(c->fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status(Code::kUnavailable, "conduitd is not reachable at " + path + " (" + strerror(errno) + ")");
  }
  op::HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(getpid());
  hello.version = op::kVersion;
  conduit::CopyCString(hello.exe, conduit::ExeName().c_str());
  conduit::SetBusyPollFromEnv();
  c->timeout_ms = 10000;
  conduit::Status w = c->Send(op::kHello, Body(hello));
  if (!w.ok()) return Wrap(w, "saying Hello");
  Frame f;
  Status st = c->Read(op::kHelloReply, &f, 0, "waiting for Hello");
  if (!st.ok()) return st;
  op::HelloReply r{};
  if (f.payload.size() != sizeof(r)) return Status(Code::kInternal, "malformed Hello reply");
  memcpy(&r, f.payload.data(), sizeof(r));
  st = FromWire(r.status);
  if (!st.ok()) return st;
  c->timeout_ms = r.timeout_ms;
  c->block = std::max<size_t>(r.block_bytes, 4096);
  *out = std::make_unique<DaemonClient>(std::move(c));
  return Status();
}

}  // namespace hoplite
