// Layout of the 128-byte ncclUniqueId as Conduit fills it (version 2).
//
// The id names the root daemon (which runs the rendezvous for the communicator), the
// communicator's 256-bit secret and its 64-bit key, a one-way function of the secret
// (security/comm_secret.h). Holding the id is what lets a rank join: programs hand it only
// to their own ranks, and nothing the daemons print contains the secret.
#ifndef CONDUIT_DAEMON_COMMON_UNIQUE_ID_H_
#define CONDUIT_DAEMON_COMMON_UNIQUE_ID_H_

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace conduit {

inline constexpr uint32_t kUniqueIdMagic = 0x55544443;  // "CDTU"
inline constexpr uint16_t kUniqueIdVersion = 2;

using CommSecret = std::array<uint8_t, 32>;

struct CommIdentity {
  uint64_t key = 0;
  std::string root_addr;  // "ip:port" of the root daemon
  CommSecret secret{};
};

void EncodeUniqueId(const CommIdentity& identity, char out[128]);
// Checks the layout (magic, version, a key, a root); the daemon also checks the key
// against the secret (CheckCommIdentity).
Status DecodeUniqueId(const char in[128], CommIdentity* identity);

// A communicator key in full, as operators see it (16 lowercase hex digits).
std::string CommKeyText(uint64_t key);
// Its first 8 hex digits: what read-only views and metrics show. Operators address a
// communicator by any unambiguous prefix of its key.
std::string CommKeyShort(uint64_t key);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_UNIQUE_ID_H_
