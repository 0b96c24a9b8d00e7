#include "policy/tenant_pacer.h"

#include <algorithm>

namespace conduit {
namespace {

// How often a yielding sender looks again whether the prioritized tenant went idle.
constexpr std::chrono::microseconds kYieldPoll(250);
// What a yielding sender may send when it has waited yield_max_ms without an idle moment.
constexpr size_t kStarvationPiece = 256 * 1024;

}  // namespace

size_t TenantPacer::Grant(size_t want, std::chrono::microseconds* retry_after) {
  const TenantPolicy& p = tenant_->policy();
  if (p.yield) {
    auto now = std::chrono::steady_clock::now();
    if (board_->HigherBusy(p.priority)) {
      if (!yielding_) {
        yielding_ = true;
        yield_since_ = now;
      }
      if (now - yield_since_ < std::chrono::milliseconds(p.yield_max_ms)) {
        *retry_after = kYieldPoll;
        return 0;
      }
      want = std::min(want, kStarvationPiece);
    }
    if (yielding_) {
      tenant_->yielded_us.fetch_add(
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - yield_since_).count()),
          std::memory_order_relaxed);
      yielding_ = false;
    }
  }
  return tenant_->TakeTokens(want, retry_after);
}

void TenantPacer::Sent(size_t granted, size_t sent) {
  tenant_->ReturnTokens(granted - sent);
  tenant_->sent_bytes.fetch_add(sent, std::memory_order_relaxed);
}

}  // namespace conduit
