// What this daemon allows the programs that connect to it, whatever service they use:
// admission by program name (a refused program falls back to its native library) and a
// cap on the shared memory one connection may map.
#ifndef CONDUIT_DAEMON_SERVER_PROGRAM_POLICY_H_
#define CONDUIT_DAEMON_SERVER_PROGRAM_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace conduit {

struct ProgramPolicy {
  std::vector<std::string> deny_exe;  // programs refused admission (--deny-exe)
  uint64_t max_shm_bytes = 64ull << 30;
};

// Ok, or why the program named `exe` (its basename) is refused.
Status CheckAdmission(const ProgramPolicy& policy, const std::string& exe);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_PROGRAM_POLICY_H_
