#include "topology/locality.h"

#include <algorithm>

#include "common/net_addr.h"

namespace conduit {
namespace {

struct Place {
  std::string pod;
  std::string rack;
};

// Unknown hosts (or hosts without a rack) get a rack of their own.
Place PlaceOf(const Topology& t, const std::string& addr) {
  const TopoHost* h = t.FindByAddr(HostOfAddr(addr));
  Place p;
  if (h != nullptr) {
    p.pod = h->pod;
    p.rack = h->rack;
  }
  if (p.rack.empty()) p.rack = "\x01host:" + addr;
  return p;
}

}  // namespace

std::vector<int> LocalityRing(const Topology& topology, const std::vector<std::string>& host_addrs) {
  const int n = static_cast<int>(host_addrs.size());
  std::vector<Place> places;
  for (const auto& a : host_addrs) places.push_back(PlaceOf(topology, a));
  // Rank each host by (first appearance of its pod, first appearance of its rack, index).
  auto first_of = [&](auto same) {
    std::vector<int> first(n);
    for (int i = 0; i < n; ++i) {
      first[i] = i;
      for (int j = 0; j < i; ++j) {
        if (same(places[i], places[j])) {
          first[i] = first[j];
          break;
        }
      }
    }
    return first;
  };
  std::vector<int> pod_first = first_of([](const Place& a, const Place& b) { return a.pod == b.pod; });
  std::vector<int> rack_first =
      first_of([](const Place& a, const Place& b) { return a.pod == b.pod && a.rack == b.rack; });
  std::vector<int> ring(n);
  for (int i = 0; i < n; ++i) ring[i] = i;
  std::stable_sort(ring.begin(), ring.end(), [&](int a, int b) {
    if (pod_first[a] != pod_first[b]) return pod_first[a] < pod_first[b];
    return rack_first[a] < rack_first[b];
  });
  return ring;
}

int RackCrossings(const Topology& topology, const std::vector<std::string>& host_addrs, const std::vector<int>& ring) {
  const int n = static_cast<int>(ring.size());
  if (n < 2) return 0;
  int crossings = 0;
  for (int p = 0; p < n; ++p) {
    Place a = PlaceOf(topology, host_addrs[ring[p]]);
    Place b = PlaceOf(topology, host_addrs[ring[(p + 1) % n]]);
    if (a.pod != b.pod || a.rack != b.rack) ++crossings;
  }
  return n == 2 ? crossings / 2 : crossings;
}

}  // namespace conduit
