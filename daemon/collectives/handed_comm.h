// HandedComm: a communicator as a live upgrade hands it to the process that replaces this
// daemon (docs/upgrade.md). Taken while the communicator is quiescent (every local rank
// between two requests, no collective running or queued, no reconfiguration under way), so
// its links carry nothing half-sent: what peers send from then on waits in the kernel, and
// the new process reads it from the same sockets. Other daemons see no change at all.
#ifndef CONDUIT_DAEMON_COLLECTIVES_HANDED_COMM_H_
#define CONDUIT_DAEMON_COLLECTIVES_HANDED_COMM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/comm_config.h"
#include "collectives/comm_stats.h"
#include "collectives/mailbox.h"
#include "common/fd_io.h"
#include "common/status.h"
#include "common/unique_id.h"

namespace conduit {

// This daemon's two links with one other host of the communicator.
struct HandedLinks {
  int host = 0;
  UniqueFd collective;
  int path = -1;  // as LinkReport: -1 the primary address
  std::string local_ip;
  uint64_t epoch = 0;  // the configuration epoch that created the collective link
  UniqueFd p2p;
};

struct HandedComm {
  uint64_t key = 0;
  CommSecret secret{};
  int nranks = 0;
  std::string exe;
  std::vector<std::string> host_addrs;  // as Membership
  std::vector<int> host_of_rank;
  std::vector<int> initial_ring;
  uint32_t protocol_version = 0;  // its collective message version; 0: from before negotiation (3)
  uint64_t coll_seq = 0;  // the next collective's sequence number: peers expect it
  CommConfig config;
  // The reconfiguration agreement's counters (EpochBarrier::Counters), at rest.
  uint64_t entered_epoch = 0;
  uint64_t proposed_epoch = 0;
  uint32_t next_request_id = 0;
  uint64_t reconfigurations = 0;
  std::vector<int> left_ranks;  // local ranks that destroyed their communicator
  Status failed;                // a failed communicator moves failed, without links
  std::vector<HandedLinks> links;
  std::vector<ArrivedMessage> messages;  // point-to-point messages not yet received
  CommStats::Totals stats;  // so that the operator's counters go on rather than reset
  std::vector<CollRecord> trace;  // the recent collectives, oldest first (GET .../trace)
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_HANDED_COMM_H_
