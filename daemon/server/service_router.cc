#include "server/service_router.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <chrono>
#include <thread>

#include "common/frame.h"
#include "common/log.h"
#include "common/net_addr.h"
#include "common/peer_protocol.h"
#include "common/shim_protocol.h"

namespace conduit {
namespace {

// A connection must name its service this soon after connecting.
constexpr int kFirstFrameTimeoutMs = 10000;

template <typename Handler>
void AcceptLoop(int listener, const char* what, Handler handle) {
  for (;;) {
    SockAddr peer;
    peer.len = sizeof(peer.storage);
    int fd = accept4(listener, reinterpret_cast<sockaddr*>(&peer.storage), &peer.len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      CLOG_ERROR("accept on the %s socket failed: %s", what, strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    std::thread(handle, UniqueFd(fd), peer).detach();
  }
}

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

}  // namespace

// Its comm when the executable cannot be read (another user's process when the daemon is
// not root).
std::string ProgramExe(int pid) {
  if (pid <= 0) return "?";
  char buf[4096];
  std::string proc = "/proc/" + std::to_string(pid);
  ssize_t n = readlink((proc + "/exe").c_str(), buf, sizeof(buf) - 1);
  if (n > 0) {
    std::string path(buf, static_cast<size_t>(n));
    return path.substr(path.rfind('/') + 1);
  }
  FILE* f = fopen((proc + "/comm").c_str(), "r");
  if (f == nullptr) return "?";
  std::string comm;
  if (fgets(buf, sizeof(buf), f) != nullptr) comm = buf;
  fclose(f);
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

std::vector<ProgramConnection> ServiceRouter::Programs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ProgramConnection> out;
  for (const auto& [id, p] : programs_) out.push_back(p);
  return out;
}

void ServiceRouter::Add(ServiceId id, Service* service) { services_[static_cast<uint8_t>(id)] = service; }

Service* ServiceRouter::Find(uint16_t type) const { return services_[static_cast<uint8_t>(ServiceOfType(type))]; }

void ServiceRouter::ServePrograms(int unix_listener) {
  AcceptLoop(unix_listener, "program", [this](UniqueFd fd, SockAddr) { RouteProgram(std::move(fd)); });
}

void ServiceRouter::ServePeers(int tcp_listener) {
  AcceptLoop(tcp_listener, "peer",
             [this](UniqueFd fd, SockAddr addr) { RoutePeer(std::move(fd), FormatSockAddr(addr)); });
}

Status ServiceRouter::FindService(int fd, uint32_t magic, uint16_t version, Service** service) const {
  FrameHeader h;
  CONDUIT_RETURN_IF_ERROR(PeekFrameHeader(fd, magic, version, &h, Deadline::AfterMs(kFirstFrameTimeoutMs)));
  *service = Find(h.type);
  if (*service == nullptr) return InvalidArgument("no service handles message type %u", h.type);
  return Status::Ok();
}

void ServiceRouter::RouteProgram(UniqueFd fd) {
  ProgramCredentials creds = CredentialsOf(fd.get());
  Service* service = nullptr;
  Status st = FindService(fd.get(), shimproto::kMagic, shimproto::kVersion, &service);
  if (!st.ok()) {
    // Probes that connect and close (the listener's own liveness check) are not news.
    if (st.message().rfind("connection closed by peer after 0 of", 0) != 0) {
      CLOG_WARN("program pid %d: connection refused: %s", creds.pid, st.message().c_str());
      WireStatus wire = ToWire(st);
      (void)WriteFrame(fd.get(), shimproto::kMagic, shimproto::kVersion, 0, 0, &wire, sizeof(wire),
                       Deadline::AfterMs(1000));
    }
    return;
  }
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    programs_[id] = ProgramConnection{id, creds, ProgramExe(creds.pid), service->name(), std::chrono::system_clock::now()};
  }
  service->ServeProgram(std::move(fd), creds);
  std::lock_guard<std::mutex> lock(mu_);
  programs_.erase(id);
}

void ServiceRouter::RoutePeer(UniqueFd fd, const std::string& peer) {
  Service* service = nullptr;
  Status st = FindService(fd.get(), peerproto::kMagic, peerproto::kVersion, &service);
  if (!st.ok()) {
    CLOG_WARN("peer connection from %s rejected: %s", peer.c_str(), st.message().c_str());
    return;
  }
  service->ServePeer(std::move(fd), peer);
}

}  // namespace conduit
