// Communicator secrets: what makes a communicator's ncclUniqueId a capability.
//
// Every communicator has a 256-bit random secret, carried in its unique id (which the
// program hands only to its own ranks) and in the rendezvous with the root daemon. Its key,
// the 64-bit name daemons, logs and operators use, is a one-way function of the secret: the
// key printed in a log or shown by the admin API lets nobody join the communicator, and
// the root refuses a rank whose secret does not produce the key. A child communicator's
// secret (split, shrink) is derived from the parent's with HMAC, so its members compute
// it without talking and nobody without the parent's secret can.
#ifndef CONDUIT_DAEMON_SECURITY_COMM_SECRET_H_
#define CONDUIT_DAEMON_SECURITY_COMM_SECRET_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/unique_id.h"

namespace conduit {

Status NewCommSecret(CommSecret* out);
// The communicator's key: 64 bits of SHA-256 over the secret, never 0.
uint64_t CommKeyOf(const CommSecret& secret);
// The child's secret for split/shrink `generation` and `color`.
CommSecret DeriveChildSecret(const CommSecret& parent, uint64_t generation, int64_t color);
// The identity of the child of `parent_secret` for split/shrink `generation` and `color`,
// rooted at `root_addr`.
CommIdentity ChildCommIdentity(const CommSecret& parent_secret, uint64_t generation, int64_t color,
                               const std::string& root_addr);
// A fresh identity rooted at the daemon `root_addr`.
Status NewCommIdentity(const std::string& root_addr, CommIdentity* out);
// The identity every rank of a job computes alike from NCCL_COMM_ID (`comm_id`, as the
// program has it) without handing an id around: the secret is HMAC-SHA256 under the
// cluster key (`cluster_key`, 32 bytes, which every daemon of the cluster holds) over the
// address and the program's uid as the kernel reports it. So nobody outside the cluster,
// and no other user on it, can compute it; a process of the same user that knows the
// address can, as anyone who reaches NCCL's bootstrap port can join there.
CommIdentity AddressCommIdentity(const uint8_t* cluster_key, size_t key_len, uint32_t uid, const std::string& comm_id,
                                 const std::string& root_addr);
// Whether the identity's key is the one its secret produces.
Status CheckCommIdentity(const CommIdentity& id);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_COMM_SECRET_H_
