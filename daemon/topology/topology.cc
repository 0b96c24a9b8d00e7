#include "topology/topology.h"

#include <set>

#include "common/net_addr.h"

namespace conduit {
namespace {

constexpr size_t kMaxHosts = 4096;
constexpr size_t kMaxPaths = 64;

Status StringField(const Json& obj, const char* field, bool required, std::string* out, const std::string& where) {
  const Json* v = obj.find(field);
  if (v == nullptr || v->is_null()) {
    if (required) return InvalidArgument("%s: missing \"%s\"", where.c_str(), field);
    return Status::Ok();
  }
  if (!v->is_string()) return InvalidArgument("%s: \"%s\" must be a string", where.c_str(), field);
  *out = v->as_string();
  return Status::Ok();
}

Status IpField(const Json& v, const std::string& where, std::string* out) {
  if (!v.is_string() || !IsNumericIp(v.as_string())) {
    return InvalidArgument("%s: expected a numeric IP address, got %s", where.c_str(), v.Dump().c_str());
  }
  *out = v.as_string();
  return Status::Ok();
}

Status ParseHost(const Json& h, size_t index, TopoHost* out) {
  const std::string where = "hosts[" + std::to_string(index) + "]";
  if (!h.is_object()) return InvalidArgument("%s must be an object", where.c_str());
  for (const auto& [key, value] : h.members()) {
    if (key != "name" && key != "addr" && key != "rack" && key != "pod" && key != "path_addrs") {
      return InvalidArgument("%s: unknown field \"%s\"", where.c_str(), key.c_str());
    }
  }
  const Json* addr = h.find("addr");
  if (addr == nullptr) return InvalidArgument("%s: missing \"addr\"", where.c_str());
  CONDUIT_RETURN_IF_ERROR(IpField(*addr, where + ".addr", &out->addr));
  out->name = out->addr;
  CONDUIT_RETURN_IF_ERROR(StringField(h, "name", false, &out->name, where));
  CONDUIT_RETURN_IF_ERROR(StringField(h, "rack", false, &out->rack, where));
  CONDUIT_RETURN_IF_ERROR(StringField(h, "pod", false, &out->pod, where));
  if (const Json* paths = h.find("path_addrs"); paths != nullptr) {
    if (!paths->is_array() || paths->size() > kMaxPaths) {
      return InvalidArgument("%s.path_addrs must be an array of at most %zu addresses", where.c_str(), kMaxPaths);
    }
    for (size_t k = 0; k < paths->items().size(); ++k) {
      std::string ip;
      CONDUIT_RETURN_IF_ERROR(IpField(paths->items()[k], where + ".path_addrs[" + std::to_string(k) + "]", &ip));
      out->path_addrs.push_back(ip);
    }
  }
  return Status::Ok();
}

}  // namespace

Status Topology::FromJson(const Json& json, Topology* out) {
  if (!json.is_object()) return InvalidArgument("a topology is a JSON object with \"hosts\"");
  for (const auto& [key, value] : json.members()) {
    if (key != "hosts" && key != "links" && key != "version") {
      return InvalidArgument("topology: unknown field \"%s\"", key.c_str());
    }
  }
  const Json* hosts = json.find("hosts");
  if (hosts == nullptr || !hosts->is_array()) return InvalidArgument("topology: \"hosts\" must be an array");
  if (hosts->size() > kMaxHosts) return InvalidArgument("topology: more than %zu hosts", kMaxHosts);
  Topology t;
  std::set<std::string> names, addrs;
  for (size_t i = 0; i < hosts->items().size(); ++i) {
    TopoHost h;
    CONDUIT_RETURN_IF_ERROR(ParseHost(hosts->items()[i], i, &h));
    if (!addrs.insert(h.addr).second) return InvalidArgument("topology: address %s listed twice", h.addr.c_str());
    if (!names.insert(h.name).second) return InvalidArgument("topology: host name %s used twice", h.name.c_str());
    t.hosts_.push_back(std::move(h));
  }
  if (const Json* links = json.find("links"); links != nullptr) {
    if (!links->is_array()) return InvalidArgument("topology: \"links\" must be an array");
    for (size_t i = 0; i < links->items().size(); ++i) {
      const Json& l = links->items()[i];
      const std::string where = "links[" + std::to_string(i) + "]";
      const Json* pair = l.is_object() ? l.find("hosts") : nullptr;
      const Json* paths = l.is_object() ? l.find("paths") : nullptr;
      if (pair == nullptr || !pair->is_array() || pair->size() != 2 || !pair->items()[0].is_string() ||
          !pair->items()[1].is_string()) {
        return InvalidArgument("%s: \"hosts\" must name two hosts", where.c_str());
      }
      const TopoHost* a = t.FindByNameOrAddr(pair->items()[0].as_string());
      const TopoHost* b = t.FindByNameOrAddr(pair->items()[1].as_string());
      if (a == nullptr || b == nullptr) return InvalidArgument("%s: names a host that is not in \"hosts\"", where.c_str());
      if (a == b) return InvalidArgument("%s: a link joins two different hosts", where.c_str());
      if (paths == nullptr || !paths->is_array() || paths->size() == 0 || paths->size() > kMaxPaths) {
        return InvalidArgument("%s: \"paths\" must be 1..%zu address pairs", where.c_str(), kMaxPaths);
      }
      const bool swap = b->addr < a->addr;
      auto& list = t.links_[swap ? std::make_pair(b->addr, a->addr) : std::make_pair(a->addr, b->addr)];
      if (!list.empty()) return InvalidArgument("%s: the pair %s-%s is listed twice", where.c_str(), a->name.c_str(), b->name.c_str());
      for (size_t k = 0; k < paths->items().size(); ++k) {
        const Json& p = paths->items()[k];
        const std::string pw = where + ".paths[" + std::to_string(k) + "]";
        if (!p.is_array() || p.size() != 2) return InvalidArgument("%s: expected [addr of %s, addr of %s]", pw.c_str(), a->name.c_str(), b->name.c_str());
        PathAddrs ends;
        CONDUIT_RETURN_IF_ERROR(IpField(p.items()[0], pw, &ends.local));
        CONDUIT_RETURN_IF_ERROR(IpField(p.items()[1], pw, &ends.remote));
        if (swap) std::swap(ends.local, ends.remote);
        list.push_back(ends);
      }
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
