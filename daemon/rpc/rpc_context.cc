#include "rpc/rpc_context.h"

#include <utility>

#include "common/log.h"

namespace conduit::rpc {

RpcContext::RpcContext(RpcOptions options, const ProgramPolicy* admission)
    : options_(std::move(options)),
      admission_(admission),
      datapath_(&policies_),
      links_(this),
      park_(ServiceId::kRpc, [this] { EndPark(); }, [this] { BeginPark(); }) {}

void RpcContext::SetStopping(const std::string& why) {
  std::lock_guard<std::mutex> lock(stop_mu_);
  stopping_ = why;
}

std::string RpcContext::stopping() const {
  std::lock_guard<std::mutex> lock(stop_mu_);
  return stopping_;
}

void RpcContext::AddAccepted(const std::shared_ptr<AcceptedLink>& link) {
  bool go_away;
  {
    std::lock_guard<std::mutex> lock(accepted_mu_);
    accepted_links_[link.get()] = link;
    go_away = going_away_;
  }
  if (go_away) link->GoAway();
}

void RpcContext::RemoveAccepted(const AcceptedLink* link) {
  std::lock_guard<std::mutex> lock(accepted_mu_);
  accepted_links_.erase(link);
}

void RpcContext::BeginPark() {
  exported_.store(0);
  std::vector<std::shared_ptr<AcceptedLink>> links;
  {
    std::lock_guard<std::mutex> lock(accepted_mu_);
    going_away_ = true;
    for (const auto& [key, weak] : accepted_links_) {
      if (auto link = weak.lock()) links.push_back(std::move(link));
    }
  }
  size_t old = 0;
  for (const auto& link : links) old += link->GoAway() ? 0 : 1;
  CLOG_INFO("live upgrade: %zu RPC link(s) from other daemons asked to carry no new call%s", links.size() - old,
            old == 0 ? "" : (", " + std::to_string(old) + " of an older release cannot be asked").c_str());
}

void RpcContext::EndPark() {
  std::lock_guard<std::mutex> lock(accepted_mu_);
  going_away_ = false;
}

std::string RpcContext::ParkBlockers() {
  std::vector<std::string> old;
  {
    std::lock_guard<std::mutex> lock(accepted_mu_);
    for (const auto& [key, weak] : accepted_links_) {
      auto link = weak.lock();
      if (link != nullptr && link->link_version() < 3) old.push_back(link->name());
    }
  }
  const int open = accepted_.load();
  if (open == 0) return "";
  std::string why = std::to_string(open) + " RPC connection(s) from other daemons still open (closed by them after "
                    "their last call)";
  if (!old.empty()) {
    why += "; " + std::to_string(old.size()) + " of them from a release without GoAway (";
    for (size_t i = 0; i < old.size(); ++i) why += (i ? ", " : "") + old[i];
    why += "): upgrade those daemons first, or wait until they have no call here";
  }
  return why;
}

}  // namespace conduit::rpc
