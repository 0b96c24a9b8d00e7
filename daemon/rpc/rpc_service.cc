#include "rpc/rpc_service.h"

#include <memory>

#include "common/log.h"
#include "rpc/peer_link.h"
#include "rpc/program_session.h"
#include "protocol/upgrade_state.pb.h"

namespace conduit::rpc {
namespace {

// How long a handed-over session waits for the others to take their state.
constexpr int kRestoreWaitMs = 5000;

}  // namespace

void RpcService::Serve(const std::shared_ptr<ProgramSession>& session, const std::function<void()>& run) {
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_.insert(session.get());
  }
  run();
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.erase(session.get());
}

void RpcService::ServeProgram(UniqueFd fd, const ProgramCredentials& creds) {
  auto session = std::make_shared<ProgramSession>(this, std::move(fd), creds);
  Serve(session, [&] { session->Run(); });
}

void RpcService::Stop(const Status& reason) {
  SetStopping(reason.message());
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    for (ProgramSession* session : sessions_) session->AbortCalls("conduit: " + reason.message());
  }
  // Links this daemon dialed: their readers would serve until the other daemon hangs up.
  // (Links other daemons opened are served on the router's threads, which shuts them.)
  links().CloseAll(reason.message());
}

void RpcService::ServePeer(Conn conn, const PeerIdentity& peer) {
  accepted_connections().fetch_add(1);
  PeerLink::Accept(this, std::move(conn), peer);
  accepted_connections().fetch_sub(1);
}

Status RpcService::ExportShared(HandedShared* out) {
  upgrade::v1::RpcShared shared;
  shared.set_sessions(static_cast<uint32_t>(sessions_exported()));
  out->state = shared.SerializeAsString();
  return Status::Ok();
}

Status RpcService::AdoptShared(HandedShared in) {
  upgrade::v1::RpcShared shared;
  if (!shared.ParseFromString(in.state) || !in.fds.empty() || shared.sessions() > (1u << 20)) {
    return InvalidArgument("the RPC service's handed-over state does not parse");
  }
  std::lock_guard<std::mutex> lock(adopt_mu_);
  to_restore_ = static_cast<int>(shared.sessions());
  return Status::Ok();
}

void RpcService::AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                              std::vector<UniqueFd> fds) {
  auto session = std::make_shared<ProgramSession>(this, std::move(fd), creds);
  Serve(session, [&] {
    session->RunAdopted(state, std::move(fds), [this] {
      std::unique_lock<std::mutex> lock(adopt_mu_);
      if (to_restore_ > 0 && --to_restore_ == 0) adopt_cv_.notify_all();
      // Serve nothing before every session is back: a held call may be for another's port.
      adopt_cv_.wait_for(lock, std::chrono::milliseconds(kRestoreWaitMs), [this] { return to_restore_ <= 0; });
    });
  });
}

void RpcService::AwaitAdopted(Deadline deadline) {
  std::unique_lock<std::mutex> lock(adopt_mu_);
  if (!adopt_cv_.wait_until(lock, deadline.when(), [this] { return to_restore_ <= 0; })) {
    CLOG_WARN("%d handed-over RPC session(s) did not take their state in time; serving without them", to_restore_);
    to_restore_ = 0;
    adopt_cv_.notify_all();
  }
}

}  // namespace conduit::rpc
