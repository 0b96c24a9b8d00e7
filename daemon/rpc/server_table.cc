#include "rpc/server_table.h"

#include "rpc/program_session.h"

namespace conduit::rpc {

Status ServerTable::Add(uint32_t port, const std::shared_ptr<ProgramSession>& session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ports_.find(port);
  if (it != ports_.end()) {
    std::shared_ptr<ProgramSession> holder = it->second.lock();
    if (holder != nullptr && holder != session) {
      return InvalidUsage("port %u is already served by %s", port, holder->name().c_str());
    }
  }
  ports_[port] = session;
  return Status::Ok();
}

void ServerTable::Remove(uint32_t port, const ProgramSession* session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ports_.find(port);
  if (it == ports_.end()) return;
  std::shared_ptr<ProgramSession> holder = it->second.lock();
  if (holder == nullptr || holder.get() == session) ports_.erase(it);
}

std::shared_ptr<ProgramSession> ServerTable::Find(uint32_t port) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ports_.find(port);
  return it == ports_.end() ? nullptr : it->second.lock();
}

std::vector<uint32_t> ServerTable::Ports() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> ports;
  for (const auto& [port, session] : ports_) {
    if (!session.expired()) ports.push_back(port);
  }
  return ports;
}

}  // namespace conduit::rpc
