// TenantPacer: the SendPacer a communicator installs on its links for one collective when
// a tenant policy covers it: it enforces the cap and yield, and counts what was sent.
#ifndef CONDUIT_DAEMON_POLICY_TENANT_PACER_H_
#define CONDUIT_DAEMON_POLICY_TENANT_PACER_H_

#include <chrono>

#include "policy/tenants.h"
#include "transport/pacer.h"

namespace conduit {

class TenantPacer : public SendPacer {
 public:
  TenantPacer(TenantState* tenant, const ActivityBoard* board) : tenant_(tenant), board_(board) {}

  size_t Grant(size_t want, std::chrono::microseconds* retry_after) override;
  void Sent(size_t granted, size_t sent) override;

 private:
  TenantState* tenant_;
  const ActivityBoard* board_;
  bool yielding_ = false;
  std::chrono::steady_clock::time_point yield_since_{};
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_POLICY_TENANT_PACER_H_
