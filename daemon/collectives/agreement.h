// Cross-host agreement on every collective.
//
// Ranks on one host are compared before their collective runs (Communicator::Execute);
// ranks on different hosts could call different collectives (a count of 1M on one host,
// 2M on another) and, without a check, some would get ncclSuccess with wrong data. So every
// inter-host transfer of a collective starts with the sending host's CollectiveHeader
// (peer_protocol.h), in each direction of each link the algorithm uses, and the receiver
// compares it with its own before it uses any of the data. A difference fails the collective
// with ncclInvalidUsage naming both hosts' calls; the communicator is then aborted and the
// other daemons learn why (kAbort), so ranks that depended on the disagreeing host fail with
// the same reason. Data from a host that disagrees is never used.
#ifndef CONDUIT_DAEMON_COLLECTIVES_AGREEMENT_H_
#define CONDUIT_DAEMON_COLLECTIVES_AGREEMENT_H_

#include <string>
#include <vector>

#include "collectives/memory_traffic.h"
#include "protocol/peer_protocol.h"
#include "protocol/shim_protocol.h"
#include "transport/link.h"

namespace conduit {

// What this host calls: the header its transfers of collective `seq` carry.
peerproto::CollectiveHeader DescribeCollective(const shimproto::OpDesc& op, uint64_t seq, uint64_t epoch);
// Ok when the peer's header is this host's; else ncclInvalidUsage naming both calls.
Status CheckAgreement(const peerproto::CollectiveHeader& mine, const peerproto::CollectiveHeader& theirs,
                      const std::string& me, const std::string& peer);

// One link as one collective sees it (a decorator over the communicator's link): its first
// send carries `mine`, its first receive checks the peer's header. All links of the
// collective's HostGroup must be AgreementLinks (SendRecv pairs them).
class AgreementLink : public Link {
 public:
  // `traffic` (may be null) counts the payload bytes sent and received.
  AgreementLink(Link* inner, const peerproto::CollectiveHeader* mine, std::string me, MemoryTraffic* traffic)
      : inner_(inner), mine_(mine), me_(std::move(me)), traffic_(traffic) {}

  Status Send(const std::vector<ConstSpan>& out, Deadline deadline, const SendGate& gate = nullptr) override;
  Status Recv(const std::vector<MutSpan>& in, Deadline deadline, const RecvProgress& progress = nullptr) override;
  Status SendRecv(const std::vector<ConstSpan>& out, Link& from, const std::vector<MutSpan>& in, Deadline deadline,
                  const RecvProgress& progress = nullptr, const SendGate& gate = nullptr,
                  const FlowLimits& limits = {}) override;
  void Shutdown() override { inner_->Shutdown(); }
  void SetPacer(SendPacer* pacer) override { inner_->SetPacer(pacer); }
  void SetSpinMicros(int micros) override { inner_->SetSpinMicros(micros); }
  const std::string& peer_name() const override { return inner_->peer_name(); }

 private:
  Link* inner_;
  const peerproto::CollectiveHeader* mine_;
  const std::string me_;
  MemoryTraffic* traffic_;
  bool sent_ = false;      // this link's outgoing header has been queued
  bool received_ = false;  // the peer's header on this link has been checked
  peerproto::CollectiveHeader theirs_{};
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_AGREEMENT_H_
