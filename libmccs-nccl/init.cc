// Communicator lifecycle on the managed path: unique ids, init (blocking, non-blocking,
// grouped, single-process), split, shrink, finalize, destroy, abort, and queries.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <numeric>
#include <thread>

#include "comm.h"
#include "device_memory.h"
#include "comm_watch.h"
#include "common/log.h"
#include "common/unique_id.h"
#include "managed.h"
#include "nccl_debug.h"
#include "ops.h"
#include "shim_log.h"

namespace conduit {

bool ValidComm(const ncclComm* comm) { return comm != nullptr && comm->magic == kCommMagic; }

Status ExplainAbort(ncclComm* comm, Status st) {
  if (st.ok()) return st;
  if (comm->revoked) return Status(st.code(), "the communicator was revoked (ncclCommRevoke) while this call waited");
  std::lock_guard<std::mutex> lock(comm->abort_mu);
  if (!comm->aborted) return st;
  return Status(st.code(), "the communicator was aborted (ncclCommAbort) while this call waited");
}

ncclResult_t WaitInit(ncclComm* comm) {
  std::unique_lock<std::mutex> lock(comm->init_mu);
  comm->init_cv.wait(lock, [comm] { return comm->init_done; });
  return comm->conn ? ncclSuccess : static_cast<ncclResult_t>(comm->async_error.load());
}

namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

// Joins `comm` (rank/nranks already set) to the communicator named by `id` through this
// host's daemon. Runs on the caller's thread, a non-blocking init thread or a group thread.
Status Join(ncclComm* comm, const CommIdentity& id) {
  std::unique_ptr<DaemonConnection> conn;
  CONDUIT_RETURN_IF_ERROR(DaemonConnection::Open(&conn));
  {
    std::lock_guard<std::mutex> lock(comm->abort_mu);
    if (comm->aborted) return InvalidUsage("the communicator was aborted during its init");
    comm->live_fd = conn->fd();  // an abort now shuts it down, ending the wait below
  }
  // Declared after `conn`, so it runs first: an init that fails forgets its fd before the
  // fd is closed (and its number reused), so a later abort cannot shut down another file.
  struct Forget {
    ncclComm* comm;
    ~Forget() {
      if (comm->conn) return;
      std::lock_guard<std::mutex> lock(comm->abort_mu);
      comm->live_fd = -1;
    }
  } forget{comm};
  shimproto::CommInitRequest req{};
  EncodeUniqueId(id, req.id);
  req.nranks = comm->nranks;
  req.rank = comm->rank;
  Frame reply;
  CONDUIT_RETURN_IF_ERROR(conn->Call(shimproto::kCommInit, &req, sizeof(req), shimproto::kCommInitReply, &reply));
  shimproto::CommInitReply head;
  if (reply.payload.size() < sizeof(head)) return SystemError("malformed CommInit reply");
  memcpy(&head, reply.payload.data(), sizeof(head));
  size_t want = sizeof(head) + head.nhosts * sizeof(shimproto::DaemonAddr) + head.nranks * sizeof(int32_t);
  if (head.nranks != comm->nranks || head.nhosts <= 0 || reply.payload.size() != want) {
    return SystemError("malformed CommInit reply (%zu bytes)", reply.payload.size());
  }
  const uint8_t* p = reply.payload.data() + sizeof(head);
  for (int h = 0; h < head.nhosts; ++h) {
    shimproto::DaemonAddr a;
    memcpy(&a, p, sizeof(a));
    p += sizeof(a);
    comm->host_addrs.push_back(FromCString(a.text));
  }
  comm->host_of_rank.resize(head.nranks);
  memcpy(comm->host_of_rank.data(), p, head.nranks * sizeof(int32_t));
  comm->host_index = head.host_index;
  comm->key = head.comm_key;
  comm->conn = std::move(conn);
  SetNcclLogDevice(comm->device);
  NCCL_SHIM_INFO(kSubsysInit, "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d commId 0x%016llx localRanks %d "
                 "hosts %d - Init COMPLETE (conduitd)", static_cast<void*>(comm), comm->rank, comm->nranks, comm->device,
                 static_cast<unsigned long long>(comm->key),
                 static_cast<int>(std::count(comm->host_of_rank.begin(), comm->host_of_rank.end(), comm->host_index)),
                 head.nhosts);
  return Status::Ok();
}

// The unique id of a child of `comm` (split, shrink): the daemon derives it from the
// parent's secret, which every member's daemon holds, so every member gets the same id.
// The child's id from the parent's, on a connection of its own: for a parent whose
// connection a revoke shut down (the daemon checks the parent's id and derives alike).
Status DeriveChildIdFromParent(ncclComm* comm, uint64_t generation, int64_t color, const std::string& root,
                               Frame* reply) {
  shimproto::DeriveIdFromParentRequest req{};
  EncodeUniqueId(comm->identity, req.parent_id);
  req.generation = generation;
  req.color = color;
  CopyCString(req.root, root.c_str());
  std::unique_ptr<DaemonConnection> conn;
  CONDUIT_RETURN_IF_ERROR(DaemonConnection::Open(&conn));
  return conn->Call(shimproto::kDeriveIdFromParent, &req, sizeof(req), shimproto::kDeriveIdFromParentReply, reply);
}

Status DeriveChildId(ncclComm* comm, uint64_t generation, int64_t color, const std::string& root, ncclUniqueId* out) {
  if (!comm->conn) return InvalidUsage("the parent communicator is not initialized");
  bool shut;
  {
    std::lock_guard<std::mutex> lock(comm->abort_mu);
    shut = comm->revoke_shut_connection;
  }
  Frame reply;
  if (shut) {
    CONDUIT_RETURN_IF_ERROR(DeriveChildIdFromParent(comm, generation, color, root, &reply));
  } else {
    shimproto::DeriveIdRequest req{};
    req.generation = generation;
    req.color = color;
    CopyCString(req.root, root.c_str());
    std::lock_guard<std::mutex> lock(comm->op_mu);
    CONDUIT_RETURN_IF_ERROR(comm->conn->Call(shimproto::kDeriveId, &req, sizeof(req), shimproto::kDeriveIdReply, &reply));
  }
  shimproto::UniqueIdReply body;
  if (reply.payload.size() != sizeof(body)) return SystemError("malformed DeriveId reply");
  memcpy(&body, reply.payload.data(), sizeof(body));
  memcpy(out->internal, body.id, sizeof(body.id));
  return Status::Ok();
}

// Stops what the communicator has in flight: conduitd fails its operations on every host
// (its peers see them fail) and lets this rank's accepted groups go, writing their words so
// no stream waits on them. A call another thread is waiting in is ended the way an abort
// ends it (the connection is shut down, which the daemon takes as this rank leaving); split
// and shrink then derive the child's id on a connection of their own. The state is
// ncclInProgress until the daemon has confirmed, then ncclSuccess, as NCCL's.
Status Revoke(ncclComm* comm) {
  comm->revoked = true;
  comm->async_error = ncclInProgress;
  WaitInit(comm);
  if (!comm->conn) return InvalidUsage("the communicator never finished its init");
  std::unique_lock<std::mutex> lock(comm->op_mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    {
      std::lock_guard<std::mutex> guard(comm->abort_mu);
      if (comm->live_fd >= 0) shutdown(comm->live_fd, SHUT_RDWR);
      comm->revoke_shut_connection = true;
    }
    lock.lock();  // the call fails at once and leaves
    return Status::Ok();
  }
  Frame reply;
  return comm->conn->Call(shimproto::kRevoke, nullptr, 0, shimproto::kRevokeReply, &reply);
}

// Finishes an init: records the outcome and wakes anyone waiting on the communicator.
ncclResult_t Complete(const char* call, ncclComm* comm, const Status& st) {
  ncclResult_t r = st.ok() ? ncclSuccess : Fail(call, ExplainAbort(comm, st));
  {
    std::lock_guard<std::mutex> lock(comm->init_mu);
    comm->async_error = r;
    comm->init_done = true;
  }
  comm->init_cv.notify_all();
  return r;
}

ncclResult_t CheckConfig(const char* call, const ncclConfig_t* config, bool* blocking) {
  *blocking = true;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)) {
    return Fail(call, ncclInvalidArgument, "ncclConfig_t was not set up with NCCL_CONFIG_INITIALIZER");
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) *blocking = config->blocking != 0;
  return ncclSuccess;
}

void FreeComm(ncclComm* comm);

// The CUDA device current on the calling thread, the one NCCL binds a communicator to at
// init (ncclCommCuDevice); 0 in a process without CUDA or without a current context.
int CurrentCudaDevice() {
  const cuda::CudaDriver* d = ProcessCuda();
  cuda::CUcontext ctx = nullptr;
  cuda::CUdevice dev = 0;
  if (d == nullptr || d->CtxGetCurrent(&ctx) != cuda::kSuccess || ctx == nullptr) return 0;
  return d->CtxGetDevice(&dev) == cuda::kSuccess ? static_cast<int>(dev) : 0;
}

// Creates the handle and starts (or queues, or runs) its init, per config and group state.
ncclResult_t StartInit(const char* call, ncclComm_t* out, int nranks, int rank, const CommIdentity& id,
                       const ncclConfig_t* config) {
  if (out == nullptr) return Fail(call, ncclInvalidArgument, "newcomm is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Fail(call, ncclInvalidArgument, "invalid rank %d for nranks %d", rank, nranks);
  }
  bool blocking;
  ncclResult_t r = CheckConfig(call, config, &blocking);
  if (r != ncclSuccess) return r;
  auto* comm = new ncclComm;
  comm->identity = id;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = CurrentCudaDevice();
  comm->blocking = blocking;
  comm->init_done = false;
  comm->async_error = ncclInProgress;
  *out = comm;
  auto job = [comm, id, call] { return Complete(call, comm, Join(comm, id)); };
  if (InGroup()) {
    GroupDefer(job);
    return blocking ? ncclSuccess : ncclInProgress;
  }
  if (!blocking) {
    comm->init_thread = std::thread(job);
    return ncclInProgress;
  }
  // A blocking init that failed leaves no communicator behind (the caller gets NULL), so a
  // program that does not clean up after a failed init does not leak one.
  r = job();
  if (r != ncclSuccess) {
    FreeComm(comm);
    *out = nullptr;
  }
  return r;
}

ncclResult_t InitFromUniqueId(const char* call, ncclComm_t* out, int nranks, const ncclUniqueId& uid, int rank,
                              const ncclConfig_t* config) {
  CommIdentity id;
  Status st = DecodeUniqueId(uid.internal, &id);
  if (!st.ok()) return Fail(call, st);
  return StartInit(call, out, nranks, rank, id, config);
}

void FreeComm(ncclComm* comm) {
  if (comm->init_thread.joinable()) comm->init_thread.join();
  StopWatchingComm(comm);
  comm->magic = 0;
  delete comm;
}

// Frees an aborted communicator once no thread can still be about to use it: a call that
// checked the handle just before the abort may not have reached the connection yet (it then
// fails on the shut-down socket within moments). So each abort frees the communicators
// aborted more than 10 s before it, and never keeps more than 64.
void Retire(ncclComm* comm) {
  using Clock = std::chrono::steady_clock;
  static std::mutex mu;
  static auto* retired = new std::deque<std::pair<Clock::time_point, ncclComm*>>;  // never destroyed
  std::vector<ncclComm*> free_now;
  {
    std::lock_guard<std::mutex> lock(mu);
    const Clock::time_point now = Clock::now();
    retired->emplace_back(now, comm);
    while (!retired->empty() && (now - retired->front().first > std::chrono::seconds(10) || retired->size() > 64)) {
      free_now.push_back(retired->front().second);
      retired->pop_front();
    }
  }
  for (ncclComm* c : free_now) FreeComm(c);
}

// NCCL_COMM_ID is "<host>:<port>" (NCCL's form); the host is resolved here (a name lookup
// has no place on the daemon's session thread) and sent as a numeric IPv4 address.
Status ParseCommIdAddress(const char* value, shimproto::UniqueIdFromAddressRequest* req) {
  const std::string text = value;
  if (text.size() >= sizeof(req->comm_id)) {
    return InvalidArgument("NCCL_COMM_ID is %zu characters; at most %zu are supported", text.size(),
                           sizeof(req->comm_id) - 1);
  }
  const size_t colon = text.rfind(':');
  const std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) == 0 || std::stoi(port) > 65535) {
    return InvalidArgument("NCCL_COMM_ID=%s is not <host>:<port>", value);
  }
  if (host.front() == '[' || host.find(':') != std::string::npos) {
    return InvalidArgument("NCCL_COMM_ID=%s names an IPv6 address; Conduit supports IPv4 only", value);
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return InvalidArgument("NCCL_COMM_ID=%s: cannot resolve %s to an IPv4 address (%s)", value, host.c_str(),
                           gai_strerror(rc));
  }
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, ip, sizeof(ip));
  freeaddrinfo(found);
  CopyCString(req->comm_id, value);
  CopyCString(req->root_ip, ip);
  return Status::Ok();
}

}  // namespace

namespace managed {

ncclResult_t GetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Fail("ncclGetUniqueId", ncclInvalidArgument, "uniqueId is NULL");
  // NCCL_COMM_ID: every rank computes the same id from the address, as NCCL's do.
  shimproto::UniqueIdFromAddressRequest from_address{};
  const char* comm_id = getenv("NCCL_COMM_ID");
  const bool by_address = comm_id != nullptr && *comm_id != '\0';
  if (by_address) {
    Status parsed = ParseCommIdAddress(comm_id, &from_address);
    if (!parsed.ok()) return Fail("ncclGetUniqueId", parsed);
  }
  std::unique_ptr<DaemonConnection> conn;
  Status st = DaemonConnection::Open(&conn);
  Frame reply;
  if (st.ok() && by_address) {
    st = conn->Call(shimproto::kUniqueIdFromAddress, &from_address, sizeof(from_address),
                    shimproto::kUniqueIdFromAddressReply, &reply);
    if (!st.ok() && st.message().find("unknown request type") != std::string::npos) {
      st = Status(st.code(), "this conduitd predates NCCL_COMM_ID support (" + st.message() +
                                 "): unset NCCL_COMM_ID and hand the id to every rank, or upgrade conduitd");
    }
  } else if (st.ok()) {
    st = conn->Call(shimproto::kGetUniqueId, nullptr, 0, shimproto::kGetUniqueIdReply, &reply);
  }
  shimproto::UniqueIdReply body;
  if (st.ok() && reply.payload.size() != sizeof(body)) st = SystemError("malformed unique id reply");
  if (!st.ok()) return Fail("ncclGetUniqueId", st);
  memcpy(&body, reply.payload.data(), sizeof(body));
  memcpy(uniqueId->internal, body.id, sizeof(body.id));
  return ncclSuccess;
}

ncclResult_t CommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  return InitFromUniqueId("ncclCommInitRankConfig", comm, nranks, commId, rank, config);
}

ncclResult_t CommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return InitFromUniqueId("ncclCommInitRank", comm, nranks, commId, rank, nullptr);
}

ncclResult_t CommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                  ncclConfig_t* config) {
  // One root daemon runs the rendezvous; the extra ids of the scalable scheme are not needed.
  if (nId < 1 || commIds == nullptr) return Fail("ncclCommInitRankScalable", ncclInvalidArgument, "no unique ids given");
  return InitFromUniqueId("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t CommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return Fail("ncclCommInitAll", ncclInvalidArgument, "need ndev >= 1 and a comm array");
  ncclUniqueId id;
  ncclResult_t r = GetUniqueId(&id);
  if (r != ncclSuccess) return r;
  GroupStart();
  for (int i = 0; i < ndev; ++i) {
    r = CommInitRank(&comms[i], ndev, id, i);
    if (r != ncclSuccess) break;
    comms[i]->device = devlist != nullptr ? devlist[i] : i;
  }
  ncclResult_t end = GroupEnd();
  if (r == ncclSuccess) r = end;
  if (r != ncclSuccess) {
    for (int i = 0; i < ndev; ++i) {
      if (ValidComm(comms[i])) FreeComm(comms[i]);
      comms[i] = nullptr;
    }
  }
  return r;
}

ncclResult_t CommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* call = "ncclCommSplit";
  if (!ValidComm(comm)) return Fail(call, ncclInvalidArgument, "invalid communicator");
  if (newcomm == nullptr) return Fail(call, ncclInvalidArgument, "newcomm is NULL");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) return Fail(call, ncclInvalidArgument, "invalid color %d", color);
  // Every rank learns every (color, key) through an all-gather on the parent.
  std::vector<int32_t> all(2 * comm->nranks);
  int32_t mine[2] = {color, key};
  PendingOp op;
  ncclResult_t r = BuildAllGather(call, mine, all.data(), 2, ncclInt32, comm, &op);
  if (r == ncclSuccess) r = RunOpNow(call, op);  // even inside a caller's group
  if (r != ncclSuccess) return r;
  const uint64_t generation = ++comm->split_generation;
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return ncclSuccess;
  }
  std::vector<int> members;
  for (int i = 0; i < comm->nranks; ++i) {
    if (all[2 * i] == color) members.push_back(i);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  int new_rank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
  ncclUniqueId child;
  Status st = DeriveChildId(comm, generation, color, comm->host_addrs[comm->host_of_rank[members[0]]], &child);
  if (!st.ok()) return Fail(call, st);
  // As NCCL: without a config the child inherits the parent's (here: blocking or not).
  ncclConfig_t inherited = NCCL_CONFIG_INITIALIZER;
  inherited.blocking = comm->blocking ? 1 : 0;
  return InitFromUniqueId(call, newcomm, static_cast<int>(members.size()), child, new_rank,
                          config != nullptr ? config : &inherited);
}

ncclResult_t CommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                        ncclConfig_t* config, int shrinkFlags) {
  const char* call = "ncclCommShrink";
  if (!ValidComm(comm)) return Fail(call, ncclInvalidArgument, "invalid communicator");
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return Fail(call, ncclInvalidArgument, "unknown shrinkFlags 0x%x", shrinkFlags);
  }
  if (shrinkFlags == NCCL_SHRINK_ABORT && !comm->revoked) {
    // First stop what the parent has in flight (its failed peers will never finish it).
    Status st = Revoke(comm);
    comm->async_error = st.ok() ? ncclSuccess : st.code();
    if (!st.ok()) return Fail(call, st);
  }
  if (newcomm == nullptr || (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    return Fail(call, ncclInvalidArgument, "bad arguments");
  }
  std::vector<bool> excluded(comm->nranks, false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= comm->nranks) return Fail(call, ncclInvalidArgument, "excluded rank %d out of range", r);
    excluded[r] = true;
  }
  if (excluded[comm->rank]) return Fail(call, ncclInvalidArgument, "rank %d excludes itself", comm->rank);
  // No collective on the (possibly broken) parent: every survivor derives the same id.
  std::vector<int> members;
  for (int i = 0; i < comm->nranks; ++i) {
    if (!excluded[i]) members.push_back(i);
  }
  int new_rank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
  const uint64_t generation = (1ull << 63) | ++comm->shrink_generation;
  ncclUniqueId child;
  Status st = DeriveChildId(comm, generation, 0, comm->host_addrs[comm->host_of_rank[members[0]]], &child);
  if (!st.ok()) return Fail(call, st);
  return InitFromUniqueId(call, newcomm, static_cast<int>(members.size()), child, new_rank, config);
}

ncclResult_t CommFinalize(ncclComm_t comm) {
  if (!ValidComm(comm)) return Fail("ncclCommFinalize", ncclInvalidArgument, "invalid communicator");
  // Ops complete before their calls return on this path, so nothing is left to flush.
  ncclResult_t r = WaitInit(comm);
  return r == ncclInProgress ? ncclSuccess : r;
}

ncclResult_t CommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!ValidComm(comm)) return Fail("ncclCommDestroy", ncclInvalidArgument, "invalid communicator");
  WaitInit(comm);
  StopWatchingComm(comm);  // no release request after the destroy's
  if (comm->conn) {
    std::lock_guard<std::mutex> lock(comm->op_mu);
    Frame reply;
    Status st = comm->conn->Call(shimproto::kCommDestroy, nullptr, 0, shimproto::kCommDestroyReply, &reply);
    if (!st.ok()) {
      CLOG_DEBUG("ncclCommDestroy: %s", st.message().c_str());
      // A daemon that died leaves streams waiting on it, and freeing the words they wait
      // on waits for those streams.
      CheckDaemonGone(comm);
    }
  }
  FreeComm(comm);
  return ncclSuccess;
}

ncclResult_t CommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (!ValidComm(comm)) return Fail("ncclCommAbort", ncclInvalidArgument, "invalid communicator");
  {
    // Before the shutdown below, which looks the same: streams waiting on a daemon that
    // died are released here (a live daemon releases them itself when the connection ends).
    std::unique_lock<std::mutex> op(comm->op_mu, std::try_to_lock);
    if (op.owns_lock()) CheckDaemonGone(comm);
  }
  comm->magic = 0;  // calls made from now on are refused
  {
    // Shutting the connection down ends, at once, a pending init and a call another thread
    // is waiting in (their reads fail). The daemon sees it close without Destroy and fails
    // the communicator on every host, so peers blocked on this rank get an error too.
    std::lock_guard<std::mutex> lock(comm->abort_mu);
    comm->aborted = true;
    if (comm->live_fd >= 0) shutdown(comm->live_fd, SHUT_RDWR);
  }
  comm->async_error = ncclInvalidUsage;
  WaitInit(comm);
  if (comm->init_thread.joinable()) comm->init_thread.join();  // it has completed: a moment
  { std::lock_guard<std::mutex> wait_for_calls(comm->op_mu); }  // calls under way have failed and left
  Retire(comm);
  return ncclSuccess;
}

ncclResult_t CommRevoke(ncclComm_t comm, int revokeFlags) {
  if (!ValidComm(comm)) return Fail("ncclCommRevoke", ncclInvalidArgument, "invalid communicator");
  if (revokeFlags != NCCL_REVOKE_DEFAULT) return Fail("ncclCommRevoke", ncclInvalidArgument, "revokeFlags must be 0");
  Status st = Revoke(comm);
  comm->async_error = st.ok() ? ncclSuccess : st.code();
  return st.ok() ? ncclSuccess : Fail("ncclCommRevoke", st);
}

ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!ValidComm(comm) || asyncError == nullptr) return Fail("ncclCommGetAsyncError", ncclInvalidArgument, "bad arguments");
  // Groups conduitd accepted and runs later may fail there: ask it, unless a call holds the
  // connection (a watchdog thread must never wait behind one; it asks again later). After a
  // revoke the failures it caused are not errors: the state is the revoke's.
  if (comm->async_error.load() == ncclSuccess && !comm->revoked) {
    std::unique_lock<std::mutex> lock(comm->op_mu, std::try_to_lock);
    if (lock.owns_lock() && comm->conn && comm->device_path.async_used()) {
      Frame reply;
      Status st = comm->conn->Call(shimproto::kAsyncError, nullptr, 0, shimproto::kAsyncErrorReply, &reply);
      // A daemon that died: its streams released and its own error recorded (comm_watch.h).
      if (!st.ok() && st.code() == ncclSystemError) CheckDaemonGone(comm);
      if (!st.ok()) {
        int expected = ncclSuccess;
        if (comm->async_error.compare_exchange_strong(expected, st.code())) {
          Fail("ncclCommGetAsyncError", Status(st.code(), "a collective conduitd accepted failed: " + st.message()));
        }
      }
    }
  }
  *asyncError = static_cast<ncclResult_t>(comm->async_error.load());
  return ncclSuccess;
}

ncclResult_t CommCount(const ncclComm_t comm, int* count) {
  if (!ValidComm(comm) || count == nullptr) return Fail("ncclCommCount", ncclInvalidArgument, "bad arguments");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t CommCuDevice(const ncclComm_t comm, int* device) {
  if (!ValidComm(comm) || device == nullptr) return Fail("ncclCommCuDevice", ncclInvalidArgument, "bad arguments");
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t CommUserRank(const ncclComm_t comm, int* rank) {
  if (!ValidComm(comm) || rank == nullptr) return Fail("ncclCommUserRank", ncclInvalidArgument, "bad arguments");
  *rank = comm->rank;
  return ncclSuccess;
}

}  // namespace managed
}  // namespace conduit
