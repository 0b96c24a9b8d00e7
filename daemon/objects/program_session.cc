#include "objects/program_session.h"

#include <errno.h>
#include <sys/socket.h>

#include "common/log.h"
#include "protocol/upgrade_state.pb.h"
#include "protocol/shim_protocol.h"
#include "server/program_policy.h"
#include "server/service_router.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

namespace conduit::objects {
namespace {

// Bounds the daemon's replies to a program that stopped reading.
constexpr int kReplyTimeoutMs = 30000;
// More supplementary groups than any system allows (NGROUPS_MAX is 65536).
constexpr size_t kMaxGroups = 65536;

// The supplementary groups of the process at the other end, as the kernel recorded them
// when it connected (SO_PEERGROUPS); none if the kernel cannot say.
std::vector<uint32_t> PeerGroups(int fd) {
  std::vector<gid_t> groups(32);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return std::vector<uint32_t>(groups.begin(), groups.end());
    }
    if (errno != ERANGE || len / sizeof(gid_t) > kMaxGroups) break;
    groups.resize(len / sizeof(gid_t));
  }
  return {};
}

}  // namespace

ProgramSession::ProgramSession(ObjectApi* service, UniqueFd fd, const ProgramCredentials& creds)
    : service_(service), fd_(std::move(fd)), creds_(creds), exe_(ProgramExe(creds.pid)) {
  caller_.pid = creds.pid;
  caller_.uid = static_cast<uint32_t>(creds.uid);
  caller_.gid = static_cast<uint32_t>(creds.gid);
  caller_.groups = PeerGroups(fd_.get());
  caller_.is_operator = creds.uid >= 0 && service_->IsOperator(caller_.uid);
  who_ = exe_ + "[" + std::to_string(creds.pid) + "] uid " + std::to_string(creds.uid);
}

ProgramSession::~ProgramSession() {
  for (auto& [id, obj] : views_) obj->DropUser();
}

Status ProgramSession::Reply(uint16_t type, const Bytes& body, int pass_fd) {
  return WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, type, 0, body.data(),
                    static_cast<uint32_t>(body.size()), Deadline::AfterMs(kReplyTimeoutMs), pass_fd);
}

Status ProgramSession::ReplyStatus(uint16_t type, const Status& st) { return Reply(type, Encode(ToObjectWire(st))); }

Deadline ProgramSession::DeadlineOf(uint32_t timeout_ms) const {
  return Deadline::AfterMs(timeout_ms == 0 ? service_->options().timeout_ms : timeout_ms);
}

Status ProgramSession::ReadRequest(ProgramPark::Member& member, Frame* f) {
  // Idle between requests is fine (and where a live upgrade stops the session); a started
  // frame must be finished promptly, or a program (or anyone: the socket is mode 0666)
  // sending a header and then nothing would hold this thread forever.
  CONDUIT_RETURN_IF_ERROR(member.AwaitRequest());
  return ReadFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, objproto::kMaxPayload, f,
                   Deadline::AfterMs(kFrameTimeoutMs));
}

std::string ProgramSession::SavedState() const {
  upgrade::v1::ObjectSession state;
  state.set_hello_done(hello_done_);
  for (const auto& [id, obj] : views_) state.add_views(id);
  return state.SerializeAsString();
}

Status ProgramSession::Restore(const std::string& bytes) {
  upgrade::v1::ObjectSession state;
  if (!state.ParseFromString(bytes) || static_cast<size_t>(state.views_size()) > kMaxViews) {
    return InvalidArgument("%s: the session state does not parse, or holds over %zu views", who_.c_str(), kMaxViews);
  }
  for (const std::string& id : state.views()) {
    ObjectRef obj = service_->LocalCopy(id);
    if (obj == nullptr || !obj->complete() || !obj->has_fd()) {
      return InvalidArgument("%s: a view of %s, which has no complete copy here", who_.c_str(), Printable(id).c_str());
    }
    if (!MayRead(caller_, obj->owner())) return InvalidArgument("%s", ReadDenied(id, caller_, obj->owner()).message().c_str());
    obj->AddUser();
    views_.emplace(id, obj);
  }
  hello_done_ = state.hello_done();
  return Status::Ok();
}

void ProgramSession::Run() {
  ProgramPark::Member member(service_->program_park(), fd_.get(), [this](std::string* state, std::vector<UniqueFd>*) {
    *state = SavedState();
    return Status::Ok();
  });
  for (;;) {
    Frame f;
    Status st = ReadRequest(member, &f);
    if (!st.ok()) {
      if (!IsEndOfStream(st)) {
        CLOG_WARN("objects: %s: dropping connection: %s", who_.c_str(), st.message().c_str());
      }
      return;
    }
    const uint16_t type = f.header.type;
    if (!hello_done_ && type != objproto::kHello) {
      (void)ReplyStatus(static_cast<uint16_t>(type + 1), Err(objproto::kInvalid, "the first request must be Hello"));
      return;
    }
    switch (type) {
      case objproto::kHello: st = OnHello(f); break;
      case objproto::kPut: st = OnPut(f); break;
      case objproto::kGet: st = OnGet(f); break;
      case objproto::kRelease: st = OnRelease(f); break;
      case objproto::kDelete: st = OnDelete(f); break;
      case objproto::kWait: st = OnWait(f); break;
      case objproto::kReduce: st = OnReduce(f); break;
      case objproto::kState: st = OnState(); break;
      default:
        st = InvalidArgument("unknown object request type 0x%04x", type);
        (void)ReplyStatus(static_cast<uint16_t>(type + 1), Err(objproto::kInvalid, "%s", st.message().c_str()));
        break;
    }
    if (!st.ok()) {
      CLOG_WARN("objects: %s: connection closed: %s", who_.c_str(), st.message().c_str());
      return;
    }
  }
}

Status ProgramSession::OnHello(const Frame& f) {
  objproto::HelloRequest req{};
  objproto::HelloReply reply{};
  reply.timeout_ms = static_cast<uint32_t>(service_->options().timeout_ms);
  reply.block_bytes = static_cast<uint32_t>(service_->options().block_bytes);
  std::string claimed_exe;  // for nothing but this check: admission asks the kernel
  if (hello_done_ || !DecodeHello(f.payload, &req, &claimed_exe)) {
    const char* why = hello_done_ ? "a second Hello" : "malformed Hello";
    reply.status = ToObjectWire(Err(objproto::kInvalid, "%s", why));
    (void)Reply(objproto::kHelloReply, Encode(reply));
    return InvalidArgument("%s", why);
  }
  // Admission goes by the executable the kernel names; what the Hello claims is ignored.
  Status st;
  if (creds_.uid < 0) {
    st = Err(objproto::kRefused, "conduitd cannot tell who this program is (no SO_PEERCRED)");
  } else if (creds_.pid <= 0 && !service_->policy()->denied().empty()) {
    // A program in a pid namespace the daemon cannot see: its executable is unknown, so a
    // deny list cannot be applied to it.
    st = Err(objproto::kRefused, "conduitd cannot see this program's pid, so cannot apply its --deny-exe list");
  } else {
    Status admission = service_->policy()->CheckAdmission(exe_);
    if (!admission.ok()) st = ObjectStatus(objproto::kRefused, admission.message());
  }
  if (st.ok() && req.version != objproto::kVersion) {
    st = Err(objproto::kRefused, "libhoplite speaks object protocol %u, conduitd %u", req.version, objproto::kVersion);
  }
  reply.status = ToObjectWire(st);
  Status w = Reply(objproto::kHelloReply, Encode(reply));
  if (!st.ok()) return InvalidUsage("%s", st.message().c_str());
  hello_done_ = true;
  return w;
}

Status ProgramSession::OnPut(const Frame& f) {
  objproto::PutRequest req{};
  std::string id;
  if (!DecodePut(f.payload, &req, &id)) {
    return ReplyStatus(objproto::kPutReply, Err(objproto::kInvalid, "malformed Put"));
  }
  const bool small = req.size < objproto::kInlineLimit;
  if (TailSize<objproto::PutRequest>(f.payload) != (small ? req.size : 0)) {
    return ReplyStatus(objproto::kPutReply, Err(objproto::kInvalid, "Put of %llu bytes carries %zu inline bytes",
                                                static_cast<unsigned long long>(req.size),
                                                TailSize<objproto::PutRequest>(f.payload)));
  }
  ObjectRef obj;
  Status st =
      service_->CreateForPut(id, req.size, Tail<objproto::PutRequest>(f.payload), caller_, req.access, &obj);
  if (!st.ok() || small) return ReplyStatus(objproto::kPutReply, st);
  if (Status sent = Reply(objproto::kPutReply, Encode(ToObjectWire(st)), obj->fd()); !sent.ok()) {
    // The program is gone or does not read: its copy, already listed, would stay half
    // written (and charged to it) forever.
    service_->AbortPut(obj, who_ + ": the Put's reply could not be sent: " + sent.message());
    return sent;
  }
  // The program copies into the memfd and reports progress; receivers may already be
  // reading the blocks it reported. Each report must come within the daemon's timeout and
  // advance, so a Put cannot idle forever holding its pinned copy.
  uint64_t ready = 0;
  for (;;) {
    Frame p;
    Status rs = ReadFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, objproto::kMaxPayload, &p,
                          Deadline::AfterMs(service_->options().timeout_ms));
    objproto::Progress prog{};
    if (rs.ok() && (p.header.type != objproto::kPutProgress || p.payload.size() != sizeof(prog) ||
                    !Decode(p.payload, &prog) || prog.bytes <= ready || prog.bytes > req.size)) {
      rs = InvalidArgument("expected PutProgress within (%llu, %llu]", static_cast<unsigned long long>(ready),
                           static_cast<unsigned long long>(req.size));
    }
    if (!rs.ok()) {
      service_->AbortPut(obj, who_ + ": " + rs.message());
      return rs;
    }
    ready = prog.bytes;
    if (ready == req.size) break;  // the last bytes become readable once sealed (FinishPut)
    obj->SetReady(ready);
  }
  st = service_->FinishPut(obj);
  if (!st.ok()) CLOG_WARN("objects: %s: %s", who_.c_str(), st.message().c_str());
  return ReplyStatus(objproto::kPutDone, st);
}

Status ProgramSession::OnGet(const Frame& f) {
  objproto::GetRequest req{};
  std::string id;
  objproto::GetReply reply{};
  if (!DecodeGet(f.payload, &req, &id)) {
    reply.status = ToObjectWire(Err(objproto::kInvalid, "malformed Get"));
    return Reply(objproto::kGetReply, Encode(reply));
  }
  const bool read_only = req.flags & objproto::kGetReadOnly;
  if (read_only && views_.size() >= kMaxViews) {
    reply.status = ToObjectWire(Err(objproto::kInvalid, "this connection holds %zu read-only views already; release some",
                              views_.size()));
    return Reply(objproto::kGetReply, Encode(reply));
  }
  const Deadline deadline = DeadlineOf(req.timeout_ms);
  Located loc;
  // A read-only Get answers only once the copy is whole, so this thread fetches it itself:
  // no thread to start for the transfer, and no wake-up from it when it ends (measured:
  // docs/benchmarks.md, "A Get's fetch on the session's own thread").
  Status st = service_->Locate(id, caller_, deadline, read_only, &loc);
  if (!st.ok()) {
    reply.status = ToObjectWire(st);
    return Reply(objproto::kGetReply, Encode(reply));
  }
  if (loc.is_inline) {
    reply.size = reply.ready = loc.inline_data.size();
    reply.inline_bytes = static_cast<uint32_t>(loc.inline_data.size());
    reply.status = ToObjectWire(Status::Ok());
    return Reply(objproto::kGetReply, Encode(reply, loc.inline_data.data(), loc.inline_data.size()));
  }
  ObjectRef obj = loc.obj;
  reply.size = obj->size();
  const bool whole_first = !obj->has_fd() || read_only;
  uint64_t ready = 0;
  if (whole_first) {
    st = obj->WaitReady(obj->size(), deadline, &ready);
    if (!st.ok()) {
      reply.status = ToObjectWire(st);
      return Reply(objproto::kGetReply, Encode(reply));
    }
    if (!obj->has_fd()) {  // small: the bytes travel in the reply
      reply.ready = obj->size();
      reply.inline_bytes = static_cast<uint32_t>(obj->size());
      reply.status = ToObjectWire(st);
      return Reply(objproto::kGetReply, Encode(reply, obj->data(), obj->size()));
    }
  }
  UniqueFd ro;
  st = obj->ReadOnlyFd(&ro);
  if (!st.ok()) {
    reply.status = ToObjectWire(st);
    return Reply(objproto::kGetReply, Encode(reply));
  }
  obj->AddUser();
  reply.ready = obj->ready();
  reply.status = ToObjectWire(Status::Ok());
  Status w = Reply(objproto::kGetReply, Encode(reply), ro.get());
  if (whole_first) {  // a read-only view: held until Release
    views_.emplace(id, obj);
    return w;
  }
  // Copying Get: tell the program about every block as it lands, so it copies while the
  // rest is still on the network.
  uint64_t pos = reply.ready;
  while (w.ok() && pos < obj->size()) {
    objproto::GetProgress prog{};
    st = obj->WaitReady(pos + 1, deadline, &ready);
    prog.status = ToObjectWire(st);
    prog.ready = ready;
    w = Reply(objproto::kGetProgress, Encode(prog));
    if (!st.ok()) break;
    pos = ready;
  }
  obj->DropUser();
  return w;
}

Status ProgramSession::OnRelease(const Frame& f) {
  std::string id;
  if (!DecodeRelease(f.payload, &id)) {
    return InvalidArgument("malformed Release");
  }
  auto it = views_.find(id);
  if (it != views_.end()) {
    it->second->DropUser();
    views_.erase(it);
  }
  return Status::Ok();
}

Status ProgramSession::OnDelete(const Frame& f) {
  std::string id;
  if (!DecodeDelete(f.payload, &id)) {
    return ReplyStatus(objproto::kDeleteReply, Err(objproto::kInvalid, "malformed Delete"));
  }
  Status st = service_->Delete(id, caller_, DeadlineOf(0));
  if (IsPermissionDenied(st)) CLOG_INFO("objects: %s: %s", who_.c_str(), st.message().c_str());
  return ReplyStatus(objproto::kDeleteReply, st);
}

Status ProgramSession::OnWait(const Frame& f) {
  objproto::WaitRequest req{};
  std::vector<std::string> ids;
  objproto::WaitReply reply{};
  if (!DecodeWait(f.payload, &req, &ids)) {
    reply.status = ToObjectWire(Err(objproto::kInvalid, "malformed Wait (need 1 <= num_ready <= n <= %u valid ids)",
                              objproto::kMaxSources));
    return Reply(objproto::kWaitReply, Encode(reply));
  }
  std::vector<uint32_t> ready;
  Status st = service_->Wait(ids, req.num_ready, caller_, DeadlineOf(req.timeout_ms), &ready);
  reply.status = ToObjectWire(st);
  reply.nready = static_cast<uint32_t>(ready.size());
  return Reply(objproto::kWaitReply, Encode(reply, ready.data(), ready.size() * sizeof(uint32_t)));
}

Status ProgramSession::OnReduce(const Frame& f) {
  objproto::ReduceRequest req{};
  std::vector<std::string> sources;
  std::string target;
  objproto::ReduceReply reply{};
  if (!DecodeReduce(f.payload, &req, &target, &sources)) {
    reply.status = ToObjectWire(Err(objproto::kInvalid, "malformed Reduce"));
    return Reply(objproto::kReduceReply, Encode(reply));
  }
  std::vector<uint32_t> used;
  uint32_t degree = 0;
  uint64_t size = 0;
  Status st = service_->Reduce(target, sources, req.num_objects, req.op, req.dtype, caller_, req.access,
                                  DeadlineOf(req.timeout_ms), &used, &degree, &size);
  reply.status = ToObjectWire(st);
  reply.size = size;
  reply.degree = degree;
  reply.nused = static_cast<uint32_t>(used.size());
  return Reply(objproto::kReduceReply, Encode(reply, used.data(), used.size() * sizeof(uint32_t)));
}

Status ProgramSession::OnState() {
  std::string json = service_->StateJson();
  if (json.size() > objproto::kMaxPayload - 512) json = "{\"error\":\"state too large\"}";
  return Reply(objproto::kStateReply, Encode(ToObjectWire(Status::Ok()), json.data(), json.size()));
}

}  // namespace conduit::objects
