#include "server/service_router.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <system_error>
#include <thread>

#include "common/detached_thread.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/net_addr.h"
#include "common/thread_guard.h"
#include "protocol/peer_protocol.h"
#include "protocol/shim_protocol.h"
#include "security/peer_security.h"
#include "server/program_park.h"
#include "server/program_policy.h"
#include "server/rate_limited_log.h"

namespace conduit {
namespace {

// A connection must name its service this soon after connecting (after its handshake).
constexpr int kFirstFrameTimeoutMs = 10000;

ProgramCredentials CredentialsOf(int fd) {
  ProgramCredentials c;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    c.pid = cred.pid;
    c.uid = static_cast<int>(cred.uid);
    c.gid = static_cast<int>(cred.gid);
  }
  return c;
}

RateLimitedLog& CapLog() {
  static RateLimitedLog log;
  return log;
}

// "2 collectives, 1 objects": how many of each.
std::string CountsText(const std::map<std::string, int>& counts) {
  std::string text;
  for (const auto& [name, n] : counts) text += (text.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  return text;
}

}  // namespace

// Only the executable's link: a program's comm (what an unreadable link once fell back to)
// is a name the program sets itself (prctl PR_SET_NAME), and the link is unreadable where
// the program made itself non-dumpable against a daemon that is not root.
std::string ProgramExe(int pid) {
  if (pid <= 0) return kUnknownExe;
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return kUnknownExe;
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(path.rfind('/') + 1);
}

size_t ServiceRouter::ProgramConnections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(program_conns_);
}

std::vector<ProgramConnection> ServiceRouter::Programs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ProgramConnection> out;
  for (const auto& [id, p] : programs_) out.push_back(p);
  return out;
}

void ServiceRouter::Add(ServiceId id, Service* service) { services_[static_cast<uint8_t>(id)] = service; }

Service* ServiceRouter::Find(uint16_t type) const { return services_[static_cast<uint8_t>(ServiceOfType(type))]; }

void ServiceRouter::ServePrograms(int unix_listener, ListenerGate* gate) {
  AcceptLoop(unix_listener, "program socket", gate, &refused_, [this](UniqueFd fd, const SockAddr&) {
    // Admitted here, on the accept loop, so that a connection counts (ProgramConnections)
    // from the moment it is accepted: a parked gate then means every program is counted.
    ProgramCredentials creds = CredentialsOf(fd.get());
    if (!AdmitProgram(creds.uid)) {
      WireStatus wire =
          ToWire(SystemError("conduitd refused the connection: too many connections from uid %d", creds.uid));
      (void)WriteFrame(fd.get(), shimproto::kMagic, shimproto::kVersion, 0, 0, &wire, sizeof(wire),
                       Deadline::AfterMs(100));
      return;
    }
    if (!StartThread("program socket", [this, creds](UniqueFd c) { RouteProgram(std::move(c), creds); },
                     std::move(fd))) {
      ReleaseProgram(creds.uid);
    }
  });
}

void ServiceRouter::ServePeers(int tcp_listener, ListenerGate* gate) {
  AcceptLoop(tcp_listener, "peer port", gate, &refused_, [this](UniqueFd fd, const SockAddr& addr) {
    const std::string peer = FormatSockAddr(addr);
    (void)StartThread("peer port", [this, peer](UniqueFd c) { RoutePeer(std::move(c), peer); }, std::move(fd));
  });
}

bool ServiceRouter::StartThread(const char* what, std::function<void(UniqueFd)> serve, UniqueFd fd) {
  if (stopping_.load()) return false;  // Shutdown has begun: the connection closes unserved
  try {
    SpawnDetached(what, [what, s = std::move(serve), c = std::move(fd)]() mutable { RunGuarded(what, [&] { s(std::move(c)); }); });
    return true;
  } catch (const std::system_error& e) {
    // pthread_create failed (RLIMIT_NPROC, memory): the connection closes unserved.
    ++refused_;
    CapLog().Warn(what, std::string("cannot start a thread for a new connection, refused: ") + e.what());
    return false;
  }
}

bool ServiceRouter::AdmitPeer(const std::string& source) {
  std::lock_guard<std::mutex> lock(mu_);
  int& from_source = handshakes_by_source_[source];
  const char* why = nullptr;
  if (handshakes_ >= limits_.max_handshakes) why = "too many connections in their handshake";
  else if (from_source >= limits_.max_handshakes_per_source) why = "too many connections in their handshake from this address";
  else if (peers_ + handshakes_ >= limits_.max_peer_connections) why = "too many peer connections";
  if (why != nullptr) {
    if (from_source == 0) handshakes_by_source_.erase(source);
    ++refused_;
    CapLog().Warn("peer port", "connection from " + source + " refused: " + why);
    return false;
  }
  ++handshakes_;
  ++from_source;
  return true;
}

void ServiceRouter::EndHandshake(const std::string& source, bool authenticated) {
  std::lock_guard<std::mutex> lock(mu_);
  --handshakes_;
  auto it = handshakes_by_source_.find(source);
  if (it != handshakes_by_source_.end() && --it->second == 0) handshakes_by_source_.erase(it);
  if (authenticated) ++peers_;
}

void ServiceRouter::ReleasePeer() {
  std::lock_guard<std::mutex> lock(mu_);
  --peers_;
}

bool ServiceRouter::AdmitProgram(int uid) {
  std::lock_guard<std::mutex> lock(mu_);
  int& mine = programs_by_uid_[uid];
  const char* why = nullptr;
  if (program_conns_ >= limits_.max_program_connections) why = "too many program connections";
  else if (mine >= limits_.max_program_connections_per_uid) why = "too many program connections from this uid";
  if (why != nullptr) {
    if (mine == 0) programs_by_uid_.erase(uid);
    ++refused_;
    CapLog().Warn("program socket", "connection from uid " + std::to_string(uid) + " refused: " + why);
    return false;
  }
  ++program_conns_;
  ++mine;
  return true;
}

void ServiceRouter::ReleaseProgram(int uid) {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseProgramLocked(uid);
}

void ServiceRouter::ReleaseProgramLocked(int uid) {
  --program_conns_;
  auto it = programs_by_uid_.find(uid);
  if (it != programs_by_uid_.end() && --it->second == 0) programs_by_uid_.erase(it);
}

void ServiceRouter::RouteProgram(UniqueFd fd, const ProgramCredentials& creds) {
  FrameHeader h;
  Status st = PeekFrameHeader(fd.get(), shimproto::kMagic, shimproto::kVersion, &h,
                              Deadline::AfterMs(kFirstFrameTimeoutMs));
  Service* service = st.ok() ? Find(h.type) : nullptr;
  if (st.ok() && service == nullptr) st = InvalidArgument("no service handles message type %u", h.type);
  if (!st.ok()) {
    // Probes that connect and close (the listener's own liveness check) are not news.
    if (!IsEndOfStream(st)) {
      CLOG_WARN("program pid %d: connection refused: %s", creds.pid, st.message().c_str());
      WireStatus wire = ToWire(st);
      (void)WriteFrame(fd.get(), shimproto::kMagic, shimproto::kVersion, 0, 0, &wire, sizeof(wire),
                       Deadline::AfterMs(1000));
    }
    ReleaseProgram(creds.uid);
    return;
  }
  ServeListed(service, std::move(fd), creds, [service, creds](UniqueFd c) { service->ServeProgram(std::move(c), creds); });
}

void ServiceRouter::ServeListed(Service* service, UniqueFd fd, const ProgramCredentials& creds,
                                const std::function<void(UniqueFd)>& serve) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_.load()) {
      ReleaseProgramLocked(creds.uid);
      return;  // Shutdown has begun and would not see this connection
    }
    id = next_id_++;
    programs_[id] = ProgramConnection{id, creds, ProgramExe(creds.pid), service->name(), std::chrono::system_clock::now(),
                                      service->program_park() != nullptr};
    program_fds_[id] = fd.get();
  }
  serve(std::move(fd));
  {
    std::lock_guard<std::mutex> lock(mu_);
    programs_.erase(id);
    program_fds_.erase(id);
    if (programs_.empty()) programs_cv_.notify_all();
  }
  ReleaseProgram(creds.uid);
}

Status ServiceRouter::ParkPrograms(Deadline deadline, std::vector<HandedProgram>* out,
                                   std::vector<HandedShared>* shared) {
  // Sessions that cannot move refuse the upgrade before any other session is stopped.
  std::map<std::string, int> unmovable;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, p] : programs_) {
      if (!p.moves) ++unmovable[p.service];
    }
  }
  if (!unmovable.empty()) {
    return Status(StatusCode::kAborted, "program sessions that do not move yet are open (" + CountsText(unmovable) +
                                            "; docs/upgrade.md): upgrade when they have ended, or stop and restart");
  }
  std::vector<ProgramPark*> parks;
  for (Service* service : services_) {
    if (service != nullptr && service->program_park() != nullptr) parks.push_back(service->program_park());
  }
  for (ProgramPark* park : parks) park->Begin();
  size_t open = 0, parked = 0;
  for (;;) {
    parked = 0;
    for (ProgramPark* park : parks) parked += park->parked();
    open = ProgramConnections();
    if (parked >= open || deadline.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Status st;
  if (parked < open) {
    std::map<std::string, int> by_service;
    for (const ProgramConnection& p : Programs()) ++by_service[p.service];
    const std::string which = by_service.empty() ? "" : " (" + CountsText(by_service) + " served)";
    std::string blockers;
    for (Service* service : services_) {
      std::string why = service != nullptr ? service->ParkBlockers() : "";
      if (!why.empty()) blockers += std::string("; ") + service->name() + ": " + why;
    }
    st = Status(StatusCode::kAborted,
                std::to_string(open - parked) + " of " + std::to_string(open) + " program connection(s)" + which +
                    " could not be stopped between two requests: a request still running (an RPC call in flight), "
                    "or a connection that has not said which service it wants" + blockers + "; try again");
  }
  for (ProgramPark* park : parks) {
    if (st.ok()) st = park->Export(out);
  }
  for (size_t id = 0; id < services_.size() && st.ok(); ++id) {
    Service* service = services_[id];
    if (service == nullptr || service->program_park() == nullptr) continue;
    HandedShared h;
    h.service = static_cast<ServiceId>(id);
    st = service->ExportShared(&h);
    if (st.ok() && (!h.state.empty() || !h.fds.empty())) shared->push_back(std::move(h));
  }
  if (!st.ok()) {
    out->clear();
    shared->clear();
    ResumePrograms();
  }
  return st;
}

Status ServiceRouter::AdoptShared(HandedShared shared) {
  const size_t id = static_cast<size_t>(shared.service);
  Service* service = id < services_.size() ? services_[id] : nullptr;
  if (service == nullptr) return InvalidArgument("state handed over for service %zu, which this daemon lacks", id);
  return service->AdoptShared(std::move(shared));
}

void ServiceRouter::AwaitAdopted(Deadline deadline) {
  for (Service* service : services_) {
    if (service != nullptr) service->AwaitAdopted(deadline);
  }
}

void ServiceRouter::StartShared() {
  for (Service* service : services_) {
    if (service != nullptr) service->StartShared();
  }
}

void ServiceRouter::ResumePrograms() {
  for (Service* service : services_) {
    if (service != nullptr && service->program_park() != nullptr) service->program_park()->Resume();
  }
}

bool ServiceRouter::AdoptProgram(ServiceId id, UniqueFd fd, const std::string& state, std::vector<UniqueFd> fds) {
  Service* service = services_[static_cast<uint8_t>(id)];
  const ProgramCredentials creds = CredentialsOf(fd.get());
  if (service == nullptr || creds.uid < 0 || !AdmitProgram(creds.uid)) return false;
  auto held = std::make_shared<std::vector<UniqueFd>>(std::move(fds));
  auto serve = [this, service, creds, state, held](UniqueFd c) {
    ServeListed(service, std::move(c), creds, [service, creds, &state, held](UniqueFd s) {
      service->AdoptProgram(std::move(s), creds, state, std::move(*held));
    });
  };
  if (!StartThread("handed-over program", serve, std::move(fd))) {
    ReleaseProgram(creds.uid);
    return false;
  }
  return true;
}

size_t ServiceRouter::Shutdown(const Status& reason, Deadline drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true);
  }
  for (Service* service : services_) {
    if (service != nullptr) service->Stop(reason);
  }
  std::unique_lock<std::mutex> lock(mu_);
  programs_cv_.wait_until(lock, drain.when(), [this] { return programs_.empty(); });
  const size_t left = programs_.size();
  // Programs that did not call in time (idle, or a long call) are cut off: their sessions
  // read end-of-file, and the programs see the connection close.
  for (const auto& [id, fd] : program_fds_) shutdown(fd, SHUT_RDWR);
  for (const auto& [id, fd] : peer_fds_) shutdown(fd, SHUT_RDWR);
  programs_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return programs_.empty(); });
  return left;
}

void ServiceRouter::RoutePeer(UniqueFd fd, const std::string& peer) {
  const std::string source = HostOfAddr(peer);
  if (!AdmitPeer(source)) return;
  Conn conn;
  PeerIdentity identity;
  Status st = security_->Accept(std::move(fd), peer, &conn, &identity);
  EndHandshake(source, st.ok());
  if (!st.ok()) {
    CLOG_WARN("peer connection from %s refused: %s", peer.c_str(), st.message().c_str());
    return;
  }
  FrameHeader h;
  st = PeekFrameHeader(conn, peerproto::kMagic, peerproto::kVersion, &h, Deadline::AfterMs(kFirstFrameTimeoutMs));
  Service* service = st.ok() ? Find(h.type) : nullptr;
  if (st.ok() && service == nullptr) st = InvalidArgument("no service handles message type %u", h.type);
  if (st.ok()) {
    const ServiceId id = ServiceOfType(h.type);
    if (conn.sealed() && id == ServiceId::kCollectives) {
      st = InvalidUsage("collective connections are never sealed, but this one is");
    } else if (!conn.sealed() && security_->seal() && id != ServiceId::kCollectives) {
      st = InvalidUsage("this daemon seals %s connections (--encrypt-peers) but this one is not sealed: start every "
                        "daemon with the same --encrypt-peers", service->name());
    }
  }
  if (!st.ok()) {
    CLOG_WARN("peer connection from %s rejected: %s", identity.Describe().c_str(), st.message().c_str());
  } else {
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = next_id_++;
      peer_fds_[id] = conn.fd();
    }
    if (!stopping_.load()) service->ServePeer(std::move(conn), identity);
    std::lock_guard<std::mutex> lock(mu_);
    peer_fds_.erase(id);
  }
  ReleasePeer();
}

}  // namespace conduit
