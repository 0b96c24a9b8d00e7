#include "policy/tenants.h"

#include <algorithm>
#include <cctype>

namespace conduit {
namespace {

constexpr double kMinBurstBytes = 64 * 1024;
constexpr double kBurstSeconds = 0.01;
// A capped send waits until it may take at least this much (or all it wants), so a slow
// cap does not turn into a stream of tiny sends.
constexpr double kMinGrantBytes = 16 * 1024;

}  // namespace

bool IsValidPolicyName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

TenantState::TenantState(TenantPolicy policy)
    : policy_(std::move(policy)),
      rate_bytes_per_us_(policy_.max_mbit_per_s * 1e6 / 8 / 1e6),
      burst_bytes_(std::max(kMinBurstBytes, policy_.max_mbit_per_s * 1e6 / 8 * kBurstSeconds)),
      tokens_(burst_bytes_),
      refilled_(std::chrono::steady_clock::now()) {}

size_t TenantState::TakeTokens(size_t want, std::chrono::microseconds* wait) {
  if (policy_.max_mbit_per_s <= 0) return want;
  std::lock_guard<std::mutex> lock(mu_);
  auto now = std::chrono::steady_clock::now();
  double dt_us = std::chrono::duration<double, std::micro>(now - refilled_).count();
  tokens_ = std::min(burst_bytes_, tokens_ + dt_us * rate_bytes_per_us_);
  refilled_ = now;
  double need = std::min(static_cast<double>(want), kMinGrantBytes);
  if (tokens_ < need) {
    auto us = static_cast<int64_t>((need - tokens_) / rate_bytes_per_us_) + 1;
    *wait = std::chrono::microseconds(us);
    capped_us.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
    return 0;
  }
  size_t grant = std::min(want, static_cast<size_t>(tokens_));
  tokens_ -= static_cast<double>(grant);
  return grant;
}

void TenantState::ReturnTokens(size_t bytes) {
  if (policy_.max_mbit_per_s <= 0 || bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  tokens_ = std::min(burst_bytes_, tokens_ + static_cast<double>(bytes));
}

bool ActivityBoard::HigherBusy(int priority) const {
  for (int p = priority + 1; p <= TenantPolicy::kMaxPriority; ++p) {
    if (busy_[p].load(std::memory_order_relaxed) > 0) return true;
  }
  return false;
}

Status Tenants::Put(const std::string& name, const Json& body) {
  if (!IsValidPolicyName(name)) return InvalidArgument("bad tenant policy name '%s' (1..64 of A-Z a-z 0-9 _ . -)", name.c_str());
  TenantPolicy p;
  CONDUIT_RETURN_IF_ERROR(TenantPolicy::FromJson(name, body, &p));
  std::lock_guard<std::mutex> lock(mu_);
  by_name_[name] = std::make_shared<TenantState>(std::move(p));
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

Status Tenants::Remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_name_.erase(name) == 0) return NotFound("no tenant policy named '%s'", name.c_str());
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

Json Tenants::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json list = Json::Array();
  for (const auto& [name, state] : by_name_) list.push_back(state->policy().ToJson());
  Json body = Json::Object();
  body["tenants"] = std::move(list);
  return body;
}

Status Tenants::Get(const std::string& name, Json* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return NotFound("no tenant policy named '%s'", name.c_str());
  *out = it->second->policy().ToJson();
  return Status::Ok();
}

Json Tenants::SavedCounters(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return Json();
  const TenantState& s = *it->second;
  Json out = Json::Object();
  out["sent_bytes"] = s.sent_bytes.load();
  out["capped_us"] = s.capped_us.load();
  out["yielded_us"] = s.yielded_us.load();
  out["collectives"] = s.collectives.load();
  return out;
}

Status Tenants::RestoreCounters(const std::string& name, const Json& saved) {
  static constexpr const char* kCounters[] = {"sent_bytes", "capped_us", "yielded_us", "collectives"};
  uint64_t values[4] = {};
  if (!saved.is_object() || saved.size() != 4) {
    return InvalidArgument("tenant '%s': the saved counters are not an object of the 4 counters", name.c_str());
  }
  for (int i = 0; i < 4; ++i) {
    const Json* v = saved.find(kCounters[i]);
    if (v == nullptr || !v->is_int() || v->as_int() < 0) {
      return InvalidArgument("tenant '%s': saved counter \"%s\" is missing or not a non-negative integer", name.c_str(),
                             kCounters[i]);
    }
    values[i] = static_cast<uint64_t>(v->as_int());
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return NotFound("no tenant policy named '%s' to give its counters", name.c_str());
  TenantState& s = *it->second;
  s.sent_bytes += values[0];
  s.capped_us += values[1];
  s.yielded_us += values[2];
  s.collectives += values[3];
  return Status::Ok();
}

std::shared_ptr<TenantState> Tenants::Resolve(const std::string& exe, const std::string& comm_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<TenantState> best;
  int best_strength = 0;
  for (const auto& [name, state] : by_name_) {  // by name: the first of equal strength wins
    int s = state->policy().MatchStrength(exe, comm_key);
    if (s > best_strength) {
      best = state;
      best_strength = s;
    }
  }
  return best;
}

void Tenants::WriteMetrics(MetricsWriter& w) const {
  std::vector<std::shared_ptr<TenantState>> states;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, state] : by_name_) states.push_back(state);
  }
  w.Family("conduit_tenant_sent_bytes_total", "counter", "Collective bytes sent to other daemons, per tenant policy.");
  for (auto& s : states) w.Sample("conduit_tenant_sent_bytes_total", {{"tenant", s->policy().name}}, static_cast<double>(s->sent_bytes.load()));
  w.Family("conduit_tenant_collectives_total", "counter", "Collectives run by communicators of the tenant.");
  for (auto& s : states) w.Sample("conduit_tenant_collectives_total", {{"tenant", s->policy().name}}, static_cast<double>(s->collectives.load()));
  w.Family("conduit_tenant_capped_seconds_total", "counter", "Time sends waited for the tenant's rate cap.");
  for (auto& s : states) w.Sample("conduit_tenant_capped_seconds_total", {{"tenant", s->policy().name}}, s->capped_us.load() / 1e6);
  w.Family("conduit_tenant_yielded_seconds_total", "counter", "Time sends waited for a higher-priority tenant to go idle.");
  for (auto& s : states) w.Sample("conduit_tenant_yielded_seconds_total", {{"tenant", s->policy().name}}, s->yielded_us.load() / 1e6);
}

}  // namespace conduit
