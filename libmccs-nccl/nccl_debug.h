// NCCL's debug conventions on the managed path (docs/gpu.md, "NCCL variables").
//
// With NCCL_DEBUG set, the shim's lines take NCCL's form, so that the tools and habits
// built on NCCL's output (grep "NCCL WARN", PyTorch's hints) work unchanged:
//   host:pid:tid [cudaDev] NCCL INFO ...      (WARN for warnings, TRACE for debug lines)
// NCCL_DEBUG_SUBSYS chooses which INFO lines appear (NCCL's names: INIT, COLL, P2P, SHM,
// NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, ALL;
// "^" in front excludes the list; default INIT,BOOTSTRAP,ENV, as NCCL), and
// NCCL_DEBUG_FILE sends the lines to a file (%h: host name, %p: pid). Warnings show
// whatever the subsystems. Without NCCL_DEBUG the shim keeps its own form ("conduit: ...")
// and its own INFO lines, but not NCCL's per-communicator and per-call ones (INIT, COLL,
// P2P), which it shows only at CONDUIT_LOG_LEVEL=debug.
#ifndef CONDUIT_LIBMCCS_NCCL_NCCL_DEBUG_H_
#define CONDUIT_LIBMCCS_NCCL_NCCL_DEBUG_H_

#include <cstdint>

#include "common/log.h"

namespace conduit {

enum NcclSubsys : uint32_t {
  kSubsysInit = 1u << 0,
  kSubsysColl = 1u << 1,
  kSubsysP2p = 1u << 2,
  kSubsysShm = 1u << 3,
  kSubsysNet = 1u << 4,
  kSubsysGraph = 1u << 5,
  kSubsysTuning = 1u << 6,
  kSubsysEnv = 1u << 7,
  kSubsysAlloc = 1u << 8,
  kSubsysCall = 1u << 9,
  kSubsysProxy = 1u << 10,
  kSubsysNvls = 1u << 11,
  kSubsysBootstrap = 1u << 12,
  kSubsysReg = 1u << 13,
  kSubsysProfile = 1u << 14,
  kSubsysRas = 1u << 15,
  kSubsysAll = ~0u,
};

// Reads NCCL_DEBUG (the level, unless CONDUIT_LOG_LEVEL set it: `level_set`),
// NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE, once, and prints the version line NCCL prints
// (for NCCL_DEBUG=VERSION and up).
void ConfigureNcclDebug(bool level_set);
// The subsystem mask NCCL_DEBUG_SUBSYS names (for tests); `text` may be null (the default).
uint32_t ParseNcclSubsys(const char* text);
// Whether an INFO line of `subsys` is shown.
bool NcclInfoEnabled(uint32_t subsys);
// The CUDA device this thread's lines name (NCCL prints the communicator's).
void SetNcclLogDevice(int device);

}  // namespace conduit

#define NCCL_SHIM_INFO(subsys, ...)                                  \
  do {                                                               \
    if (::conduit::NcclInfoEnabled(subsys)) CLOG_INFO(__VA_ARGS__);  \
  } while (0)

#endif  // CONDUIT_LIBMCCS_NCCL_NCCL_DEBUG_H_
