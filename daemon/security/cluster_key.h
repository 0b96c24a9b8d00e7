// The cluster credential: one 256-bit secret every daemon of a cluster holds, which the
// peer handshake (peer_handshake.h) proves possession of on every daemon-to-daemon
// connection. The operator provisions it as a file only root (or the daemon's own user)
// can read; docs/security.md says how and why a shared key rather than certificates.
#ifndef CONDUIT_DAEMON_SECURITY_CLUSTER_KEY_H_
#define CONDUIT_DAEMON_SECURITY_CLUSTER_KEY_H_

#include <array>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace conduit {

struct ClusterKey {
  std::array<uint8_t, 32> bytes{};
  // A fingerprint safe to log and compare across hosts (8 bytes of a hash of the key):
  // two daemons that fail to authenticate each other say whether their keys differ.
  std::array<uint8_t, 8> fingerprint{};
  std::string id;  // the fingerprint in hex
};

// Reads a key file: 64 hex digits (whitespace around them allowed). The file must be a
// regular file (not a symlink) owned by root or by the daemon's user, with no permission
// bits for group or others (like ssh's private keys); anything else is refused with the
// reason, so a key readable by other local users is never used.
Status LoadClusterKey(const std::string& path, ClusterKey* key);

// A random key known only to this process: what a daemon without --cluster-key uses, so its
// peer port answers nobody but itself (single-host use).
Status EphemeralClusterKey(ClusterKey* key);

// 64 hex digits of fresh randomness, the content of a new key file (conduitctl keygen).
Status NewClusterKeyText(std::string* text);

// Writes a new key file at `path` with mode 0600, refusing to overwrite an existing file.
Status WriteNewClusterKeyFile(const std::string& path);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_CLUSTER_KEY_H_
