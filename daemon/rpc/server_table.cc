#include "rpc/server_table.h"

#include <algorithm>

#include "rpc/served_program.h"

namespace conduit::rpc {

Status ServerTable::Add(uint32_t port, const BindAddress& bind, const std::shared_ptr<ServedProgram>& session) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry>& entries = ports_[port];
  std::erase_if(entries, [](const Entry& e) { return e.session.expired(); });
  size_t mine = 0;
  for (const Entry& e : entries) {
    std::shared_ptr<ServedProgram> holder = e.session.lock();
    if (holder == session) {
      ++mine;
    } else if (holder != nullptr && e.bind.Overlaps(bind)) {
      return InvalidUsage("port %u is already served on %s by %s", port, e.bind.Describe().c_str(),
                          holder->name().c_str());
    }
  }
  if (mine >= kMaxBindsPerPort) {
    return InvalidUsage("a program may serve port %u on at most %zu addresses", port, kMaxBindsPerPort);
  }
  entries.push_back(Entry{bind, session});
  return Status::Ok();
}

void ServerTable::Remove(uint32_t port, const ServedProgram* session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ports_.find(port);
  if (it == ports_.end()) return;
  std::erase_if(it->second, [session](const Entry& e) {
    std::shared_ptr<ServedProgram> holder = e.session.lock();
    return holder == nullptr || holder.get() == session;
  });
  if (it->second.empty()) ports_.erase(it);
}

std::shared_ptr<ServedProgram> ServerTable::Find(uint32_t port, const std::string& target_ip, bool from_link,
                                                  std::string* why) const {
  std::lock_guard<std::mutex> lock(mu_);
  why->clear();
  auto it = ports_.find(port);
  if (it == ports_.end()) return nullptr;
  std::string binds;
  bool loopback_only = true;
  for (const Entry& e : it->second) {
    std::shared_ptr<ServedProgram> holder = e.session.lock();
    if (holder == nullptr) continue;
    if (e.bind.Admits(target_ip, from_link)) return holder;
    binds += (binds.empty() ? "" : " and ") + e.bind.Describe();
    loopback_only = loopback_only && e.bind.loopback_only();
  }
  if (binds.empty()) return nullptr;
  if (from_link && loopback_only) {
    *why = "port " + std::to_string(port) + " is bound to " + binds + ": calls from other hosts cannot reach it";
  } else {
    *why = "port " + std::to_string(port) + " is bound to " + binds + ", not to " +
           (target_ip.empty() ? std::string("the address called") : target_ip);
  }
  return nullptr;
}

std::vector<uint32_t> ServerTable::Ports() const {
  std::vector<uint32_t> ports;
  for (const Served& s : List()) {
    if (ports.empty() || ports.back() != s.port) ports.push_back(s.port);
  }
  return ports;
}

std::vector<ServerTable::Served> ServerTable::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Served> out;
  for (const auto& [port, entries] : ports_) {
    for (const Entry& e : entries) {
      if (std::shared_ptr<ServedProgram> holder = e.session.lock()) {
        out.push_back(Served{port, e.bind.Describe(), holder->name()});
      }
    }
  }
  return out;
}

}  // namespace conduit::rpc
