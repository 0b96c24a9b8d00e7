// Topology::FromJson, the operator's topology file and PUT /v1/topology, from JSON text.
// What it accepts it writes back (ToJson) as a description it accepts again, unchanged;
// path lookups between its hosts stay within the topology, and the locality-aware ring
// over its hosts is a permutation.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "fuzz_check.h"
#include "topology/locality.h"
#include "topology/topology.h"

using namespace conduit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Json json;
  if (!Json::Parse(std::string_view(reinterpret_cast<const char*>(data), size), &json).ok()) return 0;
  Topology topo;
  if (!Topology::FromJson(json, &topo).ok()) return 0;
  const std::string text = topo.ToJson().Dump();
  Topology again;
  Status st = Topology::FromJson(topo.ToJson(), &again);
  FUZZ_CHECK(st.ok(), "ToJson wrote what FromJson refuses: %s\n%s", st.message().c_str(), text.c_str());
  FUZZ_CHECK(again.ToJson().Dump() == text, "round trip changed the topology:\n%s\n%s", text.c_str(),
             again.ToJson().Dump().c_str());
  const auto& hosts = topo.hosts();
  std::vector<std::string> addrs;
  for (const TopoHost& h : hosts) addrs.push_back(h.addr + ":7650");
  addrs.push_back("192.0.2.1:7650");  // a host the topology does not list
  std::vector<int> ring = LocalityRing(topo, addrs);
  std::vector<bool> seen(addrs.size(), false);
  FUZZ_CHECK(ring.size() == addrs.size(), "ring of %zu for %zu hosts", ring.size(), addrs.size());
  for (int h : ring) {
    FUZZ_CHECK(h >= 0 && static_cast<size_t>(h) < addrs.size() && !seen[h], "ring names host %d twice or out of range", h);
    seen[h] = true;
  }
  FUZZ_CHECK(RackCrossings(topo, addrs, ring) >= 0, "negative rack crossings");
  for (size_t i = 0; i < hosts.size() && i < 8; ++i) {
    FUZZ_CHECK(topo.FindByAddr(hosts[i].addr) == &hosts[i], "host %zu not found by its address", i);
    for (size_t j = 0; j < hosts.size() && j < 8; ++j) {
      for (const PathAddrs& p : topo.PathsBetween(hosts[i].addr, hosts[j].addr)) {
        FUZZ_CHECK(!p.local.empty() && !p.remote.empty(), "empty path address");
      }
    }
  }
  return 0;
}
