// Layout of the 128-byte ncclUniqueId as Conduit fills it.
//
// The id names the root daemon (which runs the rendezvous for the communicator) and a
// random 64-bit key that identifies the communicator in every daemon.
#ifndef CONDUIT_DAEMON_COMMON_UNIQUE_ID_H_
#define CONDUIT_DAEMON_COMMON_UNIQUE_ID_H_

#include <cstdint>
#include <string>

#include "common/status.h"

namespace conduit {

inline constexpr uint32_t kUniqueIdMagic = 0x55544443;  // "CDTU"
inline constexpr uint16_t kUniqueIdVersion = 1;

struct CommIdentity {
  uint64_t key = 0;
  std::string root_addr;  // "ip:port" of the root daemon
};

void EncodeUniqueId(const CommIdentity& identity, char out[128]);
Status DecodeUniqueId(const char in[128], CommIdentity* identity);

// A communicator key as operators see it (16 lowercase hex digits).
std::string CommKeyText(uint64_t key);

// A fresh random key (from getrandom), never 0.
uint64_t RandomCommKey();

// Deterministic key for a communicator derived from a parent (CommSplit/Shrink): every
// rank computes the same value without talking.
uint64_t DeriveCommKey(uint64_t parent_key, uint64_t generation, int64_t color);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_UNIQUE_ID_H_
