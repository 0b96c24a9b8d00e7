#include "collectives/membership.h"

#include <algorithm>
#include <set>

#include "collectives/comm_config.h"

namespace conduit {
namespace {

bool IsRingOver(const std::vector<int>& ring, int nhosts) {
  ReconfigPlan check;
  check.set_ring = true;
  check.ring = ring;
  return ValidatePlan(check, nhosts).ok();
}

}  // namespace

Status BuildMembership(const std::vector<std::string>& rank_addrs, const std::vector<int>& ring, int nranks,
                       const std::string& my_addr, Membership* out) {
  if (static_cast<int>(rank_addrs.size()) != nranks) {
    return InternalError("membership has %zu ranks, expected %d", rank_addrs.size(), nranks);
  }
  Membership m;
  m.host_of_rank.assign(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    auto it = std::find(m.host_addrs.begin(), m.host_addrs.end(), rank_addrs[r]);
    if (it == m.host_addrs.end()) it = m.host_addrs.insert(m.host_addrs.end(), rank_addrs[r]);
    m.host_of_rank[r] = static_cast<int>(it - m.host_addrs.begin());
  }
  auto mine = std::find(m.host_addrs.begin(), m.host_addrs.end(), my_addr);
  if (mine == m.host_addrs.end()) {
    return InternalError("this daemon (%s) serves no rank of the communicator", my_addr.c_str());
  }
  m.my_host = static_cast<int>(mine - m.host_addrs.begin());
  const int nhosts = static_cast<int>(m.host_addrs.size());
  m.initial_ring = ring;
  if (!IsRingOver(ring, nhosts)) {
    // A root that did not choose (or chose nonsense): rank order.
    m.initial_ring.clear();
    for (int h = 0; h < nhosts; ++h) m.initial_ring.push_back(h);
  }
  *out = std::move(m);
  return Status::Ok();
}

Status CheckMembership(Membership* m, int nranks, const std::string& my_addr) {
  const int nhosts = static_cast<int>(m->host_addrs.size());
  if (nhosts < 1 || nhosts > nranks) return InvalidArgument("%d hosts for %d ranks", nhosts, nranks);
  if (std::set<std::string>(m->host_addrs.begin(), m->host_addrs.end()).size() != m->host_addrs.size()) {
    return InvalidArgument("a host named twice");
  }
  auto mine = std::find(m->host_addrs.begin(), m->host_addrs.end(), my_addr);
  if (mine == m->host_addrs.end()) return InvalidArgument("this daemon (%s) is not one of its hosts", my_addr.c_str());
  m->my_host = static_cast<int>(mine - m->host_addrs.begin());
  if (static_cast<int>(m->host_of_rank.size()) != nranks) return InvalidArgument("a host for each rank is missing");
  std::vector<bool> used(nhosts, false);
  for (int h : m->host_of_rank) {
    if (h < 0 || h >= nhosts) return InvalidArgument("a rank on host %d of %d", h, nhosts);
    used[h] = true;
  }
  if (std::find(used.begin(), used.end(), false) != used.end()) return InvalidArgument("a host without ranks");
  if (!IsRingOver(m->initial_ring, nhosts)) return InvalidArgument("its initial ring is not one over its hosts");
  return Status::Ok();
}

LocalRanks::LocalRanks(const Membership& m) {
  for (int r = 0; r < static_cast<int>(m.host_of_rank.size()); ++r) {
    if (m.host_of_rank[r] == m.my_host) ranks_.push_back(r);
  }
  claimed_.assign(ranks_.size(), false);
  left_.assign(ranks_.size(), false);
}

size_t LocalRanks::IndexOf(int rank) const {
  return std::lower_bound(ranks_.begin(), ranks_.end(), rank) - ranks_.begin();
}

bool LocalRanks::Contains(int rank) const {
  const size_t i = IndexOf(rank);
  return i < ranks_.size() && ranks_[i] == rank;
}

LocalRanks::Claim LocalRanks::TryClaim(int rank) {
  if (!Contains(rank)) return Claim::kNotHere;
  const size_t i = IndexOf(rank);
  if (claimed_[i]) return Claim::kHeld;
  claimed_[i] = true;
  return Claim::kClaimed;
}

void LocalRanks::MarkLeft(int rank) {
  if (Contains(rank)) left_[IndexOf(rank)] = true;
}

std::vector<int> LocalRanks::LeftRanks() const {
  std::vector<int> out;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (left_[i]) out.push_back(ranks_[i]);
  }
  return out;
}

}  // namespace conduit
