// An ABI table is a flat list of (name, value) facts about one nccl.h, e.g.
// ("offsetof(ncclConfig_t, netName)", "32"). Two tables built from the same
// lists compare entry by entry, which keeps failure messages specific.

#ifndef CONDUIT_TESTS_ABI_ABI_TABLE_H_
#define CONDUIT_TESTS_ABI_ABI_TABLE_H_

#include <string>
#include <vector>

namespace conduit_abi {

struct AbiEntry {
  std::string name;
  std::string value;
};
using AbiTable = std::vector<AbiEntry>;

// Built in nvidia_abi_table.cc against NVIDIA's headers.
AbiTable NvidiaAbiTable();
// Built in conduit_abi_table.cc against include/nccl.h and
// include/conduit/nccl_device_host.h.
AbiTable ConduitAbiTable();

}  // namespace conduit_abi

#endif  // CONDUIT_TESTS_ABI_ABI_TABLE_H_
