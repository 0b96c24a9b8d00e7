#include "topology/topology.h"

#include <set>

#include "common/net_addr.h"
#include "config/json_message.h"
#include "config/topology.pb.h"

namespace conduit {
namespace {

constexpr size_t kMaxHosts = 4096;
constexpr size_t kMaxPaths = 64;

Status IpField(const std::string& v, const std::string& where, std::string* out) {
  if (!IsNumericIp(v)) return InvalidArgument("topology: %s: expected a numeric IP address, got '%s'", where.c_str(), v.c_str());
  *out = v;
  return Status::Ok();
}

Status ReadHost(const config::v1::TopologyHost& h, size_t index, TopoHost* out) {
  const std::string where = "hosts[" + std::to_string(index) + "]";
  if (h.addr().empty()) return InvalidArgument("topology: %s: missing \"addr\"", where.c_str());
  CONDUIT_RETURN_IF_ERROR(IpField(h.addr(), where + ".addr", &out->addr));
  out->name = h.name().empty() ? out->addr : h.name();
  out->rack = h.rack();
  out->pod = h.pod();
  if (static_cast<size_t>(h.path_addrs_size()) > kMaxPaths) {
    return InvalidArgument("topology: %s.path_addrs: at most %zu addresses", where.c_str(), kMaxPaths);
  }
  for (int k = 0; k < h.path_addrs_size(); ++k) {
    std::string ip;
    CONDUIT_RETURN_IF_ERROR(IpField(h.path_addrs(k), where + ".path_addrs[" + std::to_string(k) + "]", &ip));
    out->path_addrs.push_back(ip);
  }
  return Status::Ok();
}

// One [a, b] pair of a link's paths: two strings.
bool PairOf(const google::protobuf::ListValue& pair, std::string* a, std::string* b) {
  if (pair.values_size() != 2 || !config::IsString(pair.values(0)) || !config::IsString(pair.values(1))) return false;
  *a = pair.values(0).string_value();
  *b = pair.values(1).string_value();
  return true;
}

}  // namespace

Status Topology::FromJson(const Json& json, Topology* out) {
  if (!json.is_object()) return InvalidArgument("a topology is a JSON object with \"hosts\"");
  if (json.find("hosts") == nullptr) return InvalidArgument("topology: \"hosts\" must be an array");
  config::v1::Topology doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(json, "topology", &doc));
  if (static_cast<size_t>(doc.hosts_size()) > kMaxHosts) return InvalidArgument("topology: more than %zu hosts", kMaxHosts);
  Topology t;
  std::set<std::string> names, addrs;
  for (int i = 0; i < doc.hosts_size(); ++i) {
    TopoHost h;
    CONDUIT_RETURN_IF_ERROR(ReadHost(doc.hosts(i), static_cast<size_t>(i), &h));
    if (!addrs.insert(h.addr).second) return InvalidArgument("topology: address %s listed twice", h.addr.c_str());
    if (!names.insert(h.name).second) return InvalidArgument("topology: host name %s used twice", h.name.c_str());
    t.hosts_.push_back(std::move(h));
  }
  for (int i = 0; i < doc.links_size(); ++i) {
    const config::v1::TopologyLink& l = doc.links(i);
    const std::string where = "links[" + std::to_string(i) + "]";
    if (l.hosts_size() != 2) return InvalidArgument("topology: %s: \"hosts\" must name two hosts", where.c_str());
    const TopoHost* a = t.FindByNameOrAddr(l.hosts(0));
    const TopoHost* b = t.FindByNameOrAddr(l.hosts(1));
    if (a == nullptr || b == nullptr) {
      return InvalidArgument("topology: %s: names a host that is not in \"hosts\"", where.c_str());
    }
    if (a == b) return InvalidArgument("topology: %s: a link joins two different hosts", where.c_str());
    if (l.paths_size() == 0 || static_cast<size_t>(l.paths_size()) > kMaxPaths) {
      return InvalidArgument("topology: %s: \"paths\" must be 1..%zu address pairs", where.c_str(), kMaxPaths);
    }
    const bool swap = b->addr < a->addr;
    auto& list = t.links_[swap ? std::make_pair(b->addr, a->addr) : std::make_pair(a->addr, b->addr)];
    if (!list.empty()) {
      return InvalidArgument("topology: %s: the pair %s-%s is listed twice", where.c_str(), a->name.c_str(),
                             b->name.c_str());
    }
    for (int k = 0; k < l.paths_size(); ++k) {
      const std::string pw = where + ".paths[" + std::to_string(k) + "]";
      std::string local, remote;
      if (!PairOf(l.paths(k), &local, &remote)) {
        return InvalidArgument("topology: %s: expected [addr of %s, addr of %s]", pw.c_str(), a->name.c_str(),
                               b->name.c_str());
      }
      PathAddrs ends;
      CONDUIT_RETURN_IF_ERROR(IpField(local, pw, &ends.local));
      CONDUIT_RETURN_IF_ERROR(IpField(remote, pw, &ends.remote));
      if (swap) std::swap(ends.local, ends.remote);
      list.push_back(ends);
    }
  }
  *out = std::move(t);
  return Status::Ok();
}

Json Topology::ToJson() const {
  Json hosts = Json::Array();
  for (const TopoHost& h : hosts_) {
    Json e = Json::Object();
    e["name"] = h.name;
    e["addr"] = h.addr;
    if (!h.rack.empty()) e["rack"] = h.rack;
    if (!h.pod.empty()) e["pod"] = h.pod;
    if (!h.path_addrs.empty()) {
      Json paths = Json::Array();
      for (const auto& p : h.path_addrs) paths.push_back(p);
      e["path_addrs"] = std::move(paths);
    }
    hosts.push_back(std::move(e));
  }
  Json body = Json::Object();
  body["hosts"] = std::move(hosts);
  if (!links_.empty()) {
    Json links = Json::Array();
    for (const auto& [pair, paths] : links_) {
      Json l = Json::Object();
      Json ends = Json::Array();
      ends.push_back(FindByAddr(pair.first)->name);
      ends.push_back(FindByAddr(pair.second)->name);
      l["hosts"] = std::move(ends);
      Json list = Json::Array();
      for (const auto& p : paths) {
        Json one = Json::Array();
        one.push_back(p.local);
        one.push_back(p.remote);
        list.push_back(std::move(one));
      }
      l["paths"] = std::move(list);
      links.push_back(std::move(l));
    }
    body["links"] = std::move(links);
  }
  return body;
}

const TopoHost* Topology::FindByAddr(const std::string& ip) const {
  for (const TopoHost& h : hosts_) {
    if (h.addr == ip) return &h;
  }
  return nullptr;
}

const TopoHost* Topology::FindByNameOrAddr(const std::string& key) const {
  for (const TopoHost& h : hosts_) {
    if (h.name == key || h.addr == key) return &h;
  }
  return nullptr;
}

std::vector<PathAddrs> Topology::PathsBetween(const std::string& a_ip, const std::string& b_ip) const {
  const bool swap = b_ip < a_ip;
  auto it = links_.find(swap ? std::make_pair(b_ip, a_ip) : std::make_pair(a_ip, b_ip));
  std::vector<PathAddrs> out;
  if (it != links_.end()) {
    out = it->second;
    if (swap) {
      for (auto& p : out) std::swap(p.local, p.remote);
    }
    return out;
  }
  const TopoHost* a = FindByAddr(a_ip);
  const TopoHost* b = FindByAddr(b_ip);
  if (a == nullptr || b == nullptr) return out;
  for (size_t k = 0; k < a->path_addrs.size() && k < b->path_addrs.size(); ++k) {
    out.push_back(PathAddrs{a->path_addrs[k], b->path_addrs[k]});
  }
  return out;
}

}  // namespace conduit
