#include "topology/topology_store.h"

#include <fstream>
#include <sstream>

#include "common/log.h"

namespace conduit {

Status TopologyStore::Reload() {
  if (path_.empty()) return InvalidUsage("conduitd was started without --topology FILE; nothing to reload");
  std::ifstream in(path_);
  if (!in) return SystemError("cannot read topology file %s", path_.c_str());
  std::stringstream text;
  text << in.rdbuf();
  Json json;
  Status st = Json::Parse(text.str(), &json);
  if (!st.ok()) return InvalidArgument("topology file %s is not JSON: %s", path_.c_str(), st.message().c_str());
  Topology t;
  st = Topology::FromJson(json, &t);
  if (!st.ok()) return InvalidArgument("topology file %s: %s", path_.c_str(), st.message().c_str());
  Install(std::move(t), "file");
  return Status::Ok();
}

Status TopologyStore::Replace(const Json& json) {
  Topology t;
  CONDUIT_RETURN_IF_ERROR(Topology::FromJson(json, &t));
  Install(std::move(t), "admin");
  return Status::Ok();
}

void TopologyStore::Install(Topology topology, std::string source) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t hosts = topology.hosts().size();
  current_ = std::make_shared<const Topology>(std::move(topology));
  ++generation_;
  source_ = std::move(source);
  CLOG_INFO("topology %llu installed from %s: %zu hosts", static_cast<unsigned long long>(generation_),
            source_ == "file" ? path_.c_str() : "the admin API", hosts);
}

std::shared_ptr<const Topology> TopologyStore::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

uint64_t TopologyStore::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

Json TopologyStore::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json body = Json::Object();
  body["file"] = path_.empty() ? Json() : Json(path_);
  body["generation"] = generation_;
  body["source"] = source_;
  body["topology"] = current_->ToJson();
  return body;
}

}  // namespace conduit
