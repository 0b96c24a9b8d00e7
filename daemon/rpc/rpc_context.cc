#include "rpc/rpc_context.h"

#include <utility>

#include "common/log.h"

namespace conduit::rpc {

RpcContext::RpcContext(RpcOptions options, const ProgramPolicy* admission)
    : options_(std::move(options)),
      admission_(admission),
      datapath_(&policies_),
      links_(this),
      park_(ServiceId::kRpc, [this] { EndPark(); }, [this] { BeginPark(); }),
      link_park_(ServiceId::kRpc) {}

bool RpcContext::LinksParked() const {
  return link_park_.parked() == link_park_.members() && accepted_.load() == accepted_reading_.load();
}

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
  link_park_.Begin();
}

void RpcContext::EndPark() {
  link_park_.Resume();
  std::lock_guard<std::mutex> lock(accepted_mu_);
  going_away_ = false;
}

std::string RpcContext::ParkBlockers() {
  const size_t members = link_park_.members();
  const size_t parked = link_park_.parked();
  const int hello = accepted_.load() - accepted_reading_.load();
  std::string why;
  if (parked < members) {
    why = std::to_string(members - parked) + " of " + std::to_string(members) +
          " RPC link(s) with other daemons never between two messages with nothing left to write (a daemon that "
          "stopped in the middle of a message, or does not read)";
  }
  if (hello > 0) {
    why += (why.empty() ? "" : "; ") + std::to_string(hello) + " RPC connection(s) from other daemons still saying hello";
  }
  return why;
}

}  // namespace conduit::rpc
