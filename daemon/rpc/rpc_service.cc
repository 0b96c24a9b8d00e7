#include "rpc/rpc_service.h"

#include <memory>

#include "common/log.h"
#include "rpc/peer_link.h"
#include "rpc/program_session.h"
#include "protocol/upgrade_state.pb.h"

namespace conduit::rpc {
namespace {

// How long a handed-over session waits for the others to take their state and for the
// calls to be joined: AwaitAdopted does both within its own deadline (5 s); this bounds the
// wait should that never come.
constexpr int kRestoreWaitMs = 30000;

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
  std::vector<std::weak_ptr<PeerLink>> adopted;
  {
    std::lock_guard<std::mutex> lock(adopt_mu_);
    adopted = adopted_accepted_;
  }
  for (const auto& weak : adopted) {
    if (auto link = weak.lock()) link->Close(reason.message());
  }
}

void RpcService::ServePeer(Conn conn, const PeerIdentity& peer) {
  accepted_connections().fetch_add(1);
  PeerLink::Accept(this, std::move(conn), peer);
  accepted_connections().fetch_sub(1);
}

Status RpcService::ExportShared(HandedShared* out) {
  upgrade::v1::RpcShared shared;
  shared.set_sessions(static_cast<uint32_t>(sessions_exported()));
  std::vector<HandedProgram> links;
  CONDUIT_RETURN_IF_ERROR(link_park().Export(&links));
  for (HandedProgram& link : links) {
    upgrade::v1::RpcLinkState* state = shared.add_links();
    if (!state->ParseFromString(link.state)) return InternalError("an RPC link's state does not parse back");
    out->fds.push_back(std::move(link.fd));
    state->set_connection(static_cast<uint32_t>(out->fds.size()));
  }
  out->state = shared.SerializeAsString();
  return Status::Ok();
}

Status RpcService::AdoptShared(HandedShared in) {
  upgrade::v1::RpcShared shared;
  if (!shared.ParseFromString(in.state) || shared.sessions() > (1u << 20) ||
      static_cast<size_t>(shared.links_size()) != in.fds.size()) {
    return InvalidArgument("the RPC service's handed-over state does not parse");
  }
  std::vector<std::shared_ptr<PeerLink>> links;
  for (const upgrade::v1::RpcLinkState& state : shared.links()) {
    UniqueFd fd;
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&in.fds, state.connection(), &fd));
    std::shared_ptr<PeerLink> link;
    CONDUIT_RETURN_IF_ERROR(PeerLink::Adopt(this, std::move(fd), state, &link));
    links.push_back(std::move(link));
  }
  std::lock_guard<std::mutex> lock(adopt_mu_);
  to_restore_ = static_cast<int>(shared.sessions());
  adopted_links_ = std::move(links);
  return Status::Ok();
}

void RpcService::AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                              std::vector<UniqueFd> fds) {
  auto session = std::make_shared<ProgramSession>(this, std::move(fd), creds);
  Serve(session, [&] {
    session->RunAdopted(state, std::move(fds), [this] {
      std::unique_lock<std::mutex> lock(adopt_mu_);
      if (to_restore_ > 0 && --to_restore_ == 0) adopt_cv_.notify_all();
      // Serve nothing before every session is back and every call has its two ends: a held
      // call may be for another's port, a held event for a call another end carries.
      adopt_cv_.wait_for(lock, std::chrono::milliseconds(kRestoreWaitMs), [this] { return adopted_; });
    });
  });
}

void RpcService::AwaitAdopted(Deadline deadline) {
  std::vector<std::shared_ptr<PeerLink>> taken;
  {
    std::unique_lock<std::mutex> lock(adopt_mu_);
    if (!adopt_cv_.wait_until(lock, deadline.when(), [this] { return to_restore_ <= 0; })) {
      CLOG_WARN("%d handed-over RPC session(s) did not take their state in time; serving without them", to_restore_);
      to_restore_ = 0;
    }
    taken.swap(adopted_links_);
  }
  const size_t calls = adopted_calls().Finish(&policies());
  for (const auto& link : taken) {
    if (!link->StartAdopted()) continue;
    if (link->accepted()) {
      std::lock_guard<std::mutex> lock(adopt_mu_);
      std::erase_if(adopted_accepted_, [](const std::weak_ptr<PeerLink>& w) { return w.expired(); });
      adopted_accepted_.push_back(link);
    } else if (!link->tls()) {
      links().Adopt(link->peer(), link);
    }
  }
  if (!taken.empty() || calls > 0) {
    CLOG_INFO("upgrade: %zu RPC link(s) and %zu call(s) in flight taken over", taken.size(), calls);
  }
  std::lock_guard<std::mutex> lock(adopt_mu_);
  adopted_ = true;
  adopt_cv_.notify_all();
}

}  // namespace conduit::rpc
