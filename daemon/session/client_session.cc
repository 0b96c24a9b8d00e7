#include "session/client_session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "common/unique_id.h"
#include "common/version.h"
#include "protocol/call_page.h"
#include "protocol/shim_protocol.h"
#include "security/comm_secret.h"
#include "security/peer_security.h"
#include "gpu/runtime.h"
#include "session/group_request.h"

namespace conduit {
namespace {

constexpr int kReplyTimeoutMs = 10000;
// On every group reply: what this daemon takes, so shims send it (docs/shim-protocol.md).
constexpr uint32_t kGroupReplyServes =
    shimproto::kReplyP2pInRegions | shimproto::kReplyReduceInRegions | shimproto::kReplyCountsInPlaceRoot;

template <typename T>
bool ParseExact(const Frame& frame, T* out) {
  if (frame.payload.size() != sizeof(T)) return false;
  memcpy(out, frame.payload.data(), sizeof(T));
  return true;
}

// A fixed-size request `name`: `apply`'s status, or InvalidArgument when it is malformed.
template <typename Request, typename Apply>
Status ApplyExact(const Frame& frame, const char* name, Apply apply) {
  Request req;
  if (!ParseExact(frame, &req)) return InvalidArgument("malformed %s (%zu bytes)", name, frame.payload.size());
  return apply(req);
}

}  // namespace

ClientSession::ClientSession(UniqueFd fd, CommRegistry* registry, const ProgramPolicy* policy, std::string exe,
                             const ProgramCredentials& creds, ProgramPark* park)
    : fd_(std::move(fd)),
      registry_(registry),
      park_(park),
      policy_(policy),
      exe_(std::move(exe)),
      pid_(creds.pid),
      uid_(creds.uid),
      device_(creds.pid),
      regions_(policy->max_shm_bytes()) {}

ClientSession::~ClientSession() {
  // Out of the park first: its background-work test reads proxy_, destroyed before member_.
  member_.reset();
  // Groups not yet started are let go (their words written); the one under way ends with
  // the communicator's failure below.
  proxy_.Stop();
  // A program that vanishes without ncclCommDestroy fails its communicator everywhere,
  // so peers get an error instead of waiting for it forever.
  if (comm_) comm_->Leave(rank_, /*graceful=*/false);
  proxy_.Drain();  // the group under way has failed, or ended
  // A program gone before its stream reached its last group's ready word would leave the
  // communicator's stream waiting on it for good.
  if (last_words_.keep) {
    Status st = gpu::Runtime::Get().WriteWordNow(last_words_.device, last_words_.ready, last_words_.seq);
    if (!st.ok()) CLOG_WARN("%s: cannot release the communicator's stream: %s", who_.c_str(), st.message().c_str());
  }
}

Status ClientSession::Reply(uint16_t type, const void* payload, size_t len, int pass_fd) {
  const bool in_page = reply_in_page_ && type == shimproto::kGroupReply;
  reply_in_page_ = false;
  if (in_page && reply_page_.data() != nullptr && pass_fd < 0 && len <= kCallPagePayloadBytes) {
    if (!PutInPage(CallPageOf(reply_page_.data()), ++replies_in_page_, type, payload, len)) return Status::Ok();
    // The program is about to sleep, or asleep, on its socket.
    return WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kReplyInPage, 0, nullptr, 0,
                      Deadline::AfterMs(kReplyTimeoutMs));
  }
  return WriteFrame(fd_.get(), shimproto::kMagic, shimproto::kVersion, type, 0, payload, static_cast<uint32_t>(len),
                    Deadline::AfterMs(kReplyTimeoutMs), pass_fd);
}

Status ClientSession::ReplyStatus(uint16_t type, const Status& status) {
  WireStatus wire = ToWire(status);
  return Reply(type, &wire, sizeof(wire));
}

void ClientSession::JoinParkGroup() {
  if (member_) member_->SetGroup(comm_ ? comm_->key() : 0);
}

void ClientSession::Run() {
  if (park_ != nullptr) {
    member_ = std::make_unique<ProgramPark::Member>(
        park_, fd_.get(), [this](std::string* state, std::vector<UniqueFd>* fds) { return SavedState(state, fds); });
    // Accepted asynchronous device groups run on: a live upgrade stops the local ranks once
    // they have all run (their device state moves only at rest).
    member_->SetBackgroundWork([this] { return proxy_.busy(); });
    JoinParkGroup();
  }
  for (;;) {
    Frame frame;
    Status st = NextRequest(&frame);
    if (!st.ok()) {
      if (!IsEndOfStream(st)) {
        CLOG_WARN("%s: dropping connection after a malformed request: %s", who_.c_str(), st.message().c_str());
        (void)ReplyStatus(0, st);
      }
      return;
    }
    const uint16_t type = frame.header.type;
    const uint16_t reply_type = static_cast<uint16_t>(type + 1);
    if (type == shimproto::kRequestInPage) {
      // A wake-up for the request page, whose request may already be served: no reply.
      if (frame.payload.empty() && !frame.fd.valid()) continue;
      CLOG_WARN("%s: dropping connection after a malformed RequestInPage", who_.c_str());
      return;
    }
    if (!hello_done_ && type != shimproto::kHello) {
      (void)ReplyStatus(reply_type, InvalidUsage("the first request on a connection must be Hello"));
      return;
    }
    bool close_after = false;
    switch (type) {
      case shimproto::kHello:
        st = HandleHello(frame, &close_after);
        break;
      case shimproto::kGetUniqueId: {
        shimproto::UniqueIdReply reply{};
        CommIdentity id;
        Status made = frame.payload.empty() ? NewCommIdentity(registry_->my_addr(), &id)
                                            : InvalidArgument("GetUniqueId takes no payload");
        if (made.ok()) EncodeUniqueId(id, reply.id);
        reply.status = ToWire(made);
        st = Reply(shimproto::kGetUniqueIdReply, &reply, sizeof(reply));
        break;
      }
      case shimproto::kUniqueIdFromAddress:
        st = HandleUniqueIdFromAddress(frame);
        break;
      case shimproto::kDeriveIdFromParent:
        st = HandleDeriveIdFromParent(frame);
        break;
      case shimproto::kDeriveId:
        proxy_.Drain();  // the program's earlier groups come first
        st = HandleDeriveId(frame);
        break;
      case shimproto::kCommInit:
        st = HandleCommInit(frame);
        break;
      case shimproto::kAttachShm:
        st = HandleAttach(frame);
        break;
      case shimproto::kAttachResult:
        st = HandleAttachResult(frame);
        break;
      case shimproto::kAttachReplyPage:
        st = HandleAttachReplyPage(frame);
        break;
      case shimproto::kAttachRequestPage:
        st = HandleAttachRequestPage(frame);
        break;
      case shimproto::kGroup:
        st = HandleGroup(frame);
        break;
      case shimproto::kDeviceInfo: {
        std::vector<uint8_t> reply = DeviceSession::InfoReply();
        st = frame.payload.empty()
                 ? Reply(shimproto::kDeviceInfoReply, reply.data(), reply.size())
                 : ReplyStatus(shimproto::kDeviceInfoReply, InvalidArgument("DeviceInfo takes no payload"));
        break;
      }
      case shimproto::kRegisterBuffer:
      case shimproto::kRegisterVmmBuffer:
        st = HandleRegisterBuffer(frame);
        break;
      case shimproto::kReleaseBuffer:
        st = HandleReleaseBuffer(frame);
        break;
      case shimproto::kRegisterSpan:
        st = HandleRegisterSpan(frame);
        break;
      case shimproto::kAttachRegion:
        st = HandleAttachRegion(frame);
        break;
      case shimproto::kReleaseRegion:
        st = HandleReleaseRegion(frame);
        break;
      case shimproto::kAsyncError:
        st = frame.payload.empty() ? ReplyStatus(shimproto::kAsyncErrorReply, proxy_.error())
                                   : ReplyStatus(shimproto::kAsyncErrorReply, InvalidArgument("AsyncError takes no payload"));
        break;
      case shimproto::kRevoke:
        if (!frame.payload.empty()) {
          st = ReplyStatus(shimproto::kRevokeReply, InvalidArgument("Revoke takes no payload"));
          break;
        }
        if (comm_) comm_->Abort(InvalidUsage("rank %d revoked the communicator (ncclCommRevoke)", rank_));
        proxy_.Drain();  // the group under way fails at once; queued ones fail in turn
        st = ReplyStatus(shimproto::kRevokeReply, Status::Ok());
        break;
      case shimproto::kDeviceDrain:
        st = ReplyStatus(shimproto::kDeviceDrainReply,
                         !frame.payload.empty() ? InvalidArgument("DeviceDrain takes no payload")
                         : comm_               ? comm_->DrainDevice(Deadline::AfterMs(comm_->options().timeout_ms))
                                               : InvalidUsage("no communicator on this connection (CommInit first)"));
        break;
      case shimproto::kCommDestroy:
        proxy_.Drain();
        if (comm_) comm_->Leave(rank_, /*graceful=*/true);
        comm_.reset();
        JoinParkGroup();
        st = ReplyStatus(shimproto::kCommDestroyReply, Status::Ok());
        break;
      default:
        st = ReplyStatus(reply_type, InvalidArgument("unknown request type %u", type));
        break;
    }
    if (!st.ok()) {
      CLOG_WARN("%s: connection dropped: %s", who_.c_str(), st.message().c_str());
      return;
    }
    if (close_after) return;
  }
}

Status ClientSession::NextRequest(Frame* frame) {
  // A request in the page is in hand: the park serves it at once, or stops the session
  // with it there for the next process (its state carries the count taken).
  const bool in_page = request_page_.AwaitPending(fd_.get());
  if (member_) {
    CONDUIT_RETURN_IF_ERROR(member_->AwaitRequest({in_page, false, request_page_.attached()}));
  } else if (request_page_.attached() && !in_page) {
    CONDUIT_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, Deadline::Never(), "receive"));
  }
  // Awake: a request in the page needs no frame now (one already sent is ignored).
  request_page_.StopWaiting();
  // A request seen in the page is taken, whatever `seq` says now: only the program moves
  // it, and only forward, so one that went back is refused by Take. Looking again instead
  // would let such a program send this session, marked as in a request, to sleep on its
  // socket with no deadline, where no live upgrade can park it.
  if (in_page || request_page_.Pending()) return request_page_.Take(frame);
  return ReadFrameAfterIdle(fd_.get(), shimproto::kMagic, shimproto::kVersion, shimproto::kMaxPayload, frame,
                            shimproto::kFrameTimeoutMs, /*accept_fd=*/true);
}

Status ClientSession::HandleHello(const Frame& frame, bool* close_after) {
  shimproto::HelloRequest req;
  if (!ParseExact(frame, &req)) {
    *close_after = true;
    return ReplyStatus(shimproto::kHelloReply, InvalidArgument("malformed Hello (%zu bytes)", frame.payload.size()));
  }
  if (req.version != shimproto::kVersion) {
    *close_after = true;
    return ReplyStatus(shimproto::kHelloReply,
                       InvalidUsage("NCCL shim protocol version %u is not supported (this daemon speaks %u): install "
                                    "the libnccl.so.2 of this Conduit release",
                                    req.version, shimproto::kVersion));
  }
  // Who the program is comes from the kernel (the socket's peer pid and its executable),
  // never from what the Hello claims.
  who_ = exe_ + "[" + std::to_string(pid_) + "]";
  shimproto::HelloReply reply{};
  reply.timeout_ms = static_cast<uint32_t>(registry_->options().timeout_ms);
  CopyCString(reply.daemon_version, kDaemonVersion);
  Status admission = policy_->CheckAdmission(exe_);
  if (!admission.ok()) {
    reply.accepted = 0;
    reply.status = ToWire(admission);
    CLOG_INFO("refused %s: %s", who_.c_str(), admission.message().c_str());
    *close_after = true;
  } else {
    reply.accepted = 1;
    reply.status = ToWire(Status::Ok());
    hello_done_ = true;
  }
  return Reply(shimproto::kHelloReply, &reply, sizeof(reply));
}

Status ClientSession::HandleCommInit(const Frame& frame) {
  shimproto::CommInitRequest req;
  if (!ParseExact(frame, &req)) {
    return ReplyStatus(shimproto::kCommInitReply, InvalidArgument("malformed CommInit (%zu bytes)", frame.payload.size()));
  }
  if (comm_) return ReplyStatus(shimproto::kCommInitReply, InvalidUsage("this connection already joined a communicator"));
  CommIdentity id;
  Status st = DecodeUniqueId(req.id, &id);
  if (st.ok()) st = CheckCommIdentity(id);
  std::shared_ptr<Communicator> comm;
  if (st.ok()) st = registry_->Join(id, req.nranks, req.rank, &comm, exe_);
  if (!st.ok()) {
    CLOG_WARN("%s: ncclCommInitRank(rank %d of %d) failed: %s", who_.c_str(), req.rank, req.nranks, st.message().c_str());
    return ReplyStatus(shimproto::kCommInitReply, st);
  }
  comm_ = comm;
  rank_ = req.rank;
  JoinParkGroup();
  const Membership& m = comm->membership();
  shimproto::CommInitReply head{};
  head.status = ToWire(Status::Ok());
  head.nranks = comm->nranks();
  head.nhosts = static_cast<int32_t>(m.host_addrs.size());
  head.host_index = m.my_host;
  head.local_nranks = static_cast<int32_t>(comm->local_ranks().size());
  head.comm_key = comm->key();
  std::vector<uint8_t> payload(sizeof(head) + head.nhosts * sizeof(shimproto::DaemonAddr) + head.nranks * sizeof(int32_t));
  uint8_t* p = payload.data();
  memcpy(p, &head, sizeof(head));
  p += sizeof(head);
  for (const auto& addr : m.host_addrs) {
    shimproto::DaemonAddr a{};
    CopyCString(a.text, addr.c_str());
    memcpy(p, &a, sizeof(a));
    p += sizeof(a);
  }
  for (int h : m.host_of_rank) {
    int32_t v = h;
    memcpy(p, &v, sizeof(v));
    p += sizeof(v);
  }
  CLOG_DEBUG("%s joined communicator %016llx as rank %d/%d", who_.c_str(), static_cast<unsigned long long>(comm->key()),
             req.rank, req.nranks);
  return Reply(shimproto::kCommInitReply, payload.data(), payload.size());
}

Status ClientSession::HandleDeriveId(const Frame& frame) {
  shimproto::DeriveIdRequest req;
  shimproto::UniqueIdReply reply{};
  Status st;
  if (!ParseExact(frame, &req)) {
    st = InvalidArgument("malformed DeriveId (%zu bytes)", frame.payload.size());
  } else if (!comm_) {
    st = InvalidUsage("no communicator on this connection to split or shrink (CommInit first)");
  } else if (FromCString(req.root).empty()) {
    st = InvalidArgument("DeriveId names no root daemon");
  } else {
    EncodeUniqueId(ChildCommIdentity(comm_->secret(), req.generation, req.color, FromCString(req.root)), reply.id);
  }
  reply.status = ToWire(st);
  return Reply(shimproto::kDeriveIdReply, &reply, sizeof(reply));
}

Status ClientSession::HandleDeriveIdFromParent(const Frame& frame) {
  shimproto::DeriveIdFromParentRequest req;
  shimproto::UniqueIdReply reply{};
  CommIdentity parent;
  Status st;
  if (!ParseExact(frame, &req)) {
    st = InvalidArgument("malformed DeriveIdFromParent (%zu bytes)", frame.payload.size());
  } else if (FromCString(req.root).empty()) {
    st = InvalidArgument("DeriveIdFromParent names no root daemon");
  } else {
    // Holding the parent's id is holding its secret: whoever may derive its children.
    st = DecodeUniqueId(req.parent_id, &parent);
    if (st.ok()) st = CheckCommIdentity(parent);
  }
  if (st.ok()) {
    EncodeUniqueId(ChildCommIdentity(parent.secret, req.generation, req.color, FromCString(req.root)), reply.id);
  }
  reply.status = ToWire(st);
  return Reply(shimproto::kDeriveIdFromParentReply, &reply, sizeof(reply));
}

namespace {

// The root daemon of an NCCL_COMM_ID communicator: the daemon of the host the address
// names, on this daemon's peer port (a cluster's daemons share one). Every rank's daemon
// must name it alike, so the root host's own daemon is named by its advertised address:
// NCCL_COMM_ID must give that address, or a loopback one for a job on one host.
Status RootForAddress(const std::string& root_ip, const std::string& my_addr, std::string* root) {
  in_addr ip{};
  if (inet_pton(AF_INET, root_ip.c_str(), &ip) != 1) {
    return InvalidArgument("NCCL_COMM_ID's host %s is not an IPv4 address (only IPv4 is supported)", root_ip.c_str());
  }
  const size_t colon = my_addr.rfind(':');
  if (colon == std::string::npos) return InternalError("this daemon's address %s has no port", my_addr.c_str());
  const bool loopback = (ntohl(ip.s_addr) >> 24) == 127;
  *root = loopback || root_ip == my_addr.substr(0, colon) ? my_addr : root_ip + my_addr.substr(colon);
  return Status::Ok();
}

}  // namespace

Status ClientSession::HandleUniqueIdFromAddress(const Frame& frame) {
  shimproto::UniqueIdFromAddressRequest req;
  shimproto::UniqueIdReply reply{};
  Status st;
  std::string root;
  if (!ParseExact(frame, &req)) {
    st = InvalidArgument("malformed UniqueIdFromAddress (%zu bytes)", frame.payload.size());
  } else if (memchr(req.comm_id, '\0', sizeof(req.comm_id)) == nullptr || req.comm_id[0] == '\0') {
    st = InvalidArgument("UniqueIdFromAddress needs NCCL_COMM_ID, NUL-terminated within %zu bytes", sizeof(req.comm_id));
  } else if (uid_ < 0) {
    st = InvalidUsage("conduitd cannot tell which user this program runs as (no SO_PEERCRED)");
  } else {
    st = RootForAddress(FromCString(req.root_ip), registry_->my_addr(), &root);
  }
  if (st.ok()) {
    const ClusterKey& key = registry_->options().security->key();
    CommIdentity id = AddressCommIdentity(key.bytes.data(), key.bytes.size(), static_cast<uint32_t>(uid_),
                                          FromCString(req.comm_id), root);
    EncodeUniqueId(id, reply.id);
    CLOG_INFO("%s: the unique id of NCCL_COMM_ID=%s is communicator %s, rooted at %s", who_.c_str(),
              FromCString(req.comm_id).c_str(), CommKeyShort(id.key).c_str(), root.c_str());
  }
  reply.status = ToWire(st);
  return Reply(shimproto::kUniqueIdFromAddressReply, &reply, sizeof(reply));
}

Status ClientSession::HandleAttach(Frame& frame) {
  shimproto::AttachShmRequest req;
  Status st;
  if (!ParseExact(frame, &req)) {
    st = InvalidArgument("malformed AttachShm (%zu bytes)", frame.payload.size());
  } else if (!frame.fd.valid()) {
    st = InvalidArgument("AttachShm arrived without a file descriptor");
  } else {
    st = shm_.Map(frame.fd.get(), req.size, policy_->max_shm_bytes());
    if (st.ok()) shm_fd_ = std::move(frame.fd);
  }
  return ReplyStatus(shimproto::kAttachShmReply, st);
}

namespace {

// What AttachReplyPage and AttachRequestPage both carry: no payload, one descriptor.
Status CheckPageAttach(const Frame& frame, const char* name) {
  if (!frame.payload.empty()) return InvalidArgument("%s takes no payload (%zu bytes)", name, frame.payload.size());
  if (!frame.fd.valid()) return InvalidArgument("%s arrived without a file descriptor", name);
  return Status::Ok();
}

}  // namespace

Status ClientSession::HandleAttachReplyPage(Frame& frame) {
  Status st = CheckPageAttach(frame, "AttachReplyPage");
  if (st.ok()) {
    // Sealed against shrinking, at least one page (ShmSegment::Map checks both). A second
    // page replaces the first; both sides count its replies from 0.
    st = reply_page_.Map(frame.fd.get(), kCallPageBytes, kCallPageBytes);
    reply_page_fd_ = st.ok() ? std::move(frame.fd) : UniqueFd();
    replies_in_page_ = 0;
  }
  return ReplyStatus(shimproto::kAttachReplyPageReply, st);
}

Status ClientSession::HandleAttachRequestPage(Frame& frame) {
  Status st = CheckPageAttach(frame, "AttachRequestPage");
  // Requests through a page only where their replies come through one.
  if (st.ok() && reply_page_.data() == nullptr) st = InvalidUsage("AttachRequestPage before AttachReplyPage");
  // A second page replaces the first; both sides count its requests from 0.
  if (st.ok()) st = request_page_.Attach(std::move(frame.fd), 0);
  return ReplyStatus(shimproto::kAttachRequestPageReply, st);
}

Status ClientSession::HandleAttachResult(const Frame& frame) {
  shimproto::AttachResultRequest req;
  shimproto::AttachResultReply reply{};
  UniqueFd fd;
  Status st;
  if (!ParseExact(frame, &req)) {
    st = InvalidArgument("malformed AttachResult (%zu bytes)", frame.payload.size());
  } else if (!comm_) {
    st = InvalidUsage("no communicator on this connection (CommInit first)");
  } else if (comm_->local_ranks().size() < 2) {
    st = InvalidUsage("communicator %s has one rank on this host: its results need no result area",
                      CommKeyShort(comm_->key()).c_str());
  } else {
    st = comm_->result_area().Attach(req.min_bytes, policy_->max_shm_bytes(), &fd, &reply.size, &reply.area);
  }
  if (st.ok()) {
    result_area_ = reply.area;
  } else {
    CLOG_INFO("%s: AttachResult refused (results come through the program's segment): %s", who_.c_str(),
              st.message().c_str());
  }
  reply.status = ToWire(st);
  return Reply(shimproto::kAttachResultReply, &reply, sizeof(reply), st.ok() ? fd.get() : -1);
}

bool ClientSession::ResultAreaStale(const ParsedGroup& group) const {
  if (!(group.head.flags & shimproto::kGroupStreamed) || group.ops.size() != 1 || !comm_) return false;
  if (!shimproto::ResultAreaServes(group.ops[0].kind, static_cast<int>(comm_->local_ranks().size()))) return false;
  std::shared_ptr<ResultArea::Area> area = comm_->result_area().Current();
  return area == nullptr || area->number != result_area_;
}

Status ClientSession::HandleRegisterBuffer(const Frame& frame) {
  // Both kinds: RegisterBuffer (an IPC handle) and RegisterVmmBuffer (a descriptor).
  const uint16_t type = frame.header.type;
  shimproto::RegisterBufferRequest req;
  Status st = ParseRegisterBuffer(type, frame.payload, frame.fd.valid(), &req);
  if (st.ok()) st = device_.Register(req, type == shimproto::kRegisterVmmBuffer ? frame.fd.get() : -1);
  if (!st.ok()) {
    CLOG_INFO("%s: %s refused: %s", who_.c_str(), type == shimproto::kRegisterVmmBuffer ? "RegisterVmmBuffer" : "RegisterBuffer",
              st.message().c_str());
  }
  return ReplyStatus(static_cast<uint16_t>(type + 1), st);
}

Status ClientSession::HandleRegisterSpan(const Frame& frame) {
  shimproto::RegisterSpanRequest req;
  std::vector<uint64_t> pages;
  Status st = frame.fd.valid() ? InvalidArgument("RegisterSpan carries no descriptor")
                               : ParseRegisterSpan(frame.payload, &req, &pages);
  if (st.ok()) st = device_.RegisterSpan(req.span_id, req.device, pages);
  if (!st.ok()) CLOG_INFO("%s: RegisterSpan refused: %s", who_.c_str(), st.message().c_str());
  return ReplyStatus(shimproto::kRegisterSpanReply, st);
}

Status ClientSession::HandleReleaseBuffer(const Frame& frame) {
  Status st = ApplyExact<shimproto::ReleaseBufferRequest>(
      frame, "ReleaseBuffer", [&](const auto& req) { return device_.Release(req.buffer_id); });
  // A mapping that only finished GPU work still held closes now, not at the next sweep: the
  // program may free the allocation next and want the memory back at once.
  if (st.ok() && comm_) comm_->ReleaseFinishedDeviceWork();
  return ReplyStatus(shimproto::kReleaseBufferReply, st);
}

Status ClientSession::HandleAttachRegion(Frame& frame) {
  Status st = ApplyExact<shimproto::AttachRegionRequest>(frame, "AttachRegion", [&](const auto& req) {
    return regions_.Attach(req.region_id, std::move(frame.fd), req.size);
  });
  if (!st.ok()) CLOG_INFO("%s: AttachRegion refused (the program stages instead): %s", who_.c_str(), st.message().c_str());
  return ReplyStatus(shimproto::kAttachRegionReply, st);
}

Status ClientSession::HandleReleaseRegion(const Frame& frame) {
  return ReplyStatus(shimproto::kReleaseRegionReply,
                     ApplyExact<shimproto::ReleaseRegionRequest>(
                         frame, "ReleaseRegion", [&](const auto& req) { return regions_.Release(req.region_id); }));
}

namespace {

bool HasDeviceP2p(const std::vector<shimproto::OpDesc>& ops) {
  for (const shimproto::OpDesc& op : ops) {
    if ((op.flags & shimproto::kOpDevice) && (op.kind == shimproto::kSend || op.kind == shimproto::kRecv)) return true;
  }
  return false;
}

// The connection's point-to-point stream on `device`, made on first use (or anew when the
// program's stream moved to another GPU).
Status EnsureP2pStream(int device, std::unique_ptr<gpu::CommStream>* stream) {
  if (*stream && (*stream)->device() == device) return Status::Ok();
  stream->reset();
  return gpu::CommStream::Create(gpu::Runtime::Get(), device, stream);
}

}  // namespace

Status ClientSession::HandleAsyncGroup(const ParsedGroup& group) {
  shimproto::GroupReply reply{};
  reply.failed_op = -1;
  reply.flags = kGroupReplyServes;
  // What the proxy's job needs, owned by it.
  struct Job {
    std::vector<shimproto::OpDesc> ops;
    std::vector<DeviceOpBuffers> device_ops;
    DeviceSession::AsyncWords words;
  };
  auto job = std::make_shared<Job>();
  job->ops = group.ops;
  // A connection whose accepted group failed takes no more: the program learns why here
  // or from ncclCommGetAsyncError (kAsyncError).
  Status st = proxy_.error();
  if (st.ok() && !comm_) st = InvalidUsage("no communicator on this connection (CommInit first)");
  const RankBuffer buffer{shm_.data(), shm_.size()};
  if (st.ok()) {
    st = device_.ResolveAsync(group.async_header, group.ops, group.refs, rank_, comm_->nranks(), &job->device_ops,
                              &job->words);
  }
  for (size_t i = 0; st.ok() && i < group.ops.size(); ++i) {
    st = comm_->ValidateOp(rank_, buffer, group.ops[i]);
    if (!st.ok()) reply.failed_op = static_cast<int32_t>(i);
  }
  if (st.ok()) last_words_ = job->words;
  if (st.ok()) {
    // proxy_ is joined before p2p_stream_ is destroyed (declared after it).
    st = proxy_.Push([comm = comm_, rank = rank_, buffer, job, who = who_, p2p = &p2p_stream_](bool run) -> Status {
      Status result = run ? Status::Ok() : RemoteError("the program's connection closed before the group ran");
      if (run) {
        GroupContext context;
        context.device_ops = &job->device_ops;
        context.ready_word = job->words.ready;
        context.ready_value = job->words.seq;
        if (HasDeviceP2p(job->ops)) {
          result = EnsureP2pStream(job->words.device, p2p);
          context.p2p_stream = p2p->get();
        }
        int failed_op = -1;
        if (result.ok()) result = comm->RunGroup(rank, buffer, job->ops, &failed_op, context);
        if (result.ok()) result = comm->SignalDeviceDone(job->words.done, job->words.seq, job->words.device, job->words.keep);
        if (result.ok()) return result;
        CLOG_WARN("%s: an accepted asynchronous device group failed (the program sees it through "
                  "ncclCommGetAsyncError): %s",
                  who.c_str(), result.message().c_str());
      }
      // Release both waiting streams. The ready word at once (the communicator's stream may
      // wait on it); the done word on the communicator's stream, behind an earlier group's
      // done write still queued there, which would otherwise land later and take the word
      // back below this group's number, leaving the program's stream waiting for good.
      gpu::Runtime& rt = gpu::Runtime::Get();
      Status w = rt.WriteWordNow(job->words.device, job->words.ready, job->words.seq);
      if (w.ok() && !comm->SignalDeviceDone(job->words.done, job->words.seq, job->words.device, job->words.keep).ok()) {
        w = rt.WriteWordNow(job->words.device, job->words.done, job->words.seq);  // no stream yet: nothing queued
      }
      if (!w.ok()) CLOG_WARN("%s: cannot release a stream waiting on a failed group: %s", who.c_str(), w.message().c_str());
      return result;
    });
  }
  reply.status = ToWire(st);
  return Reply(shimproto::kGroupReply, &reply, sizeof(reply));
}

Status ClientSession::HandleGroup(const Frame& frame) {
  shimproto::GroupReply reply{};
  reply.failed_op = -1;
  reply.flags = kGroupReplyServes;
  shimproto::DeviceGroupReplyTail tail{};
  ParsedGroup group;
  Status st = ParseGroupRequest(frame.payload, &group);
  reply_in_page_ = st.ok() && (group.head.flags & shimproto::kGroupReplyInPage) != 0;
  if (st.ok() && group.async) return HandleAsyncGroup(group);
  // The program's earlier asynchronous groups come first.
  proxy_.Drain();
  const bool device = st.ok() && group.device;
  if (st.ok() && !comm_) st = InvalidUsage("no communicator on this connection (CommInit first)");
  if (st.ok()) {
    GroupContext context{(group.head.flags & shimproto::kGroupStreamed) != 0, fd_.get()};
    context.result_area = result_area_;
    std::vector<DeviceOpBuffers> device_ops;
    if (device) {
      bool event_unusable = false;
      st = device_.Resolve(group.dev, group.ops, group.refs, rank_, comm_->nranks(), &device_ops, &context.ready_event,
                           &event_unusable);
      if (event_unusable) reply.flags |= shimproto::kReplyEventUnusable;  // nothing ran: the shim stages it again
      context.device_ops = &device_ops;
      context.done_event = reinterpret_cast<cuda::IpcEventHandle*>(tail.done_event);
    }
    int failed_op = -1;
    std::vector<HostOpBuffers> host_ops;
    if (st.ok() && group.regions) {
      st = regions_.Resolve(group.ops, group.region_refs, rank_, comm_->nranks(), &host_ops, &failed_op);
      context.host_ops = &host_ops;
    }
    if (st.ok()) st = comm_->RunGroup(rank_, RankBuffer{shm_.data(), shm_.size()}, group.ops, &failed_op, context);
    reply.failed_op = failed_op;
    if (st.ok() && ResultAreaStale(group)) reply.flags |= shimproto::kReplyResultAttach;
  }
  reply.status = ToWire(st);
  if (!device || !st.ok()) return Reply(shimproto::kGroupReply, &reply, sizeof(reply));
  std::vector<uint8_t> payload(sizeof(reply) + sizeof(tail));
  memcpy(payload.data(), &reply, sizeof(reply));
  memcpy(payload.data() + sizeof(reply), &tail, sizeof(tail));
  return Reply(shimproto::kGroupReply, payload.data(), payload.size());
}

}  // namespace conduit
