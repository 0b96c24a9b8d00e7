// Block-pipelined object transfers between daemons.
//
// A receiver opens a data connection to the sender's peer port (pooled per sender) and
// sends Fetch{id, offset}; the sender answers with the size and then streams bytes
// [offset, size) as they become ready in its own copy, which may itself still be
// arriving (from a program's Put, another daemon, or a reduce). The receiver writes
// straight into its copy's memory and publishes progress every block, so the next hop
// can forward that block at once.
#ifndef CONDUIT_DAEMON_OBJECTS_TRANSFER_H_
#define CONDUIT_DAEMON_OBJECTS_TRANSFER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/conn.h"
#include "common/fd_io.h"
#include "objects/local_store.h"

namespace conduit {
class PeerSecurity;
}

namespace conduit::objects {

// Idle data connections, per sender address; new ones are authenticated (and sealed when
// the cluster encrypts) by `security`.
class DataPool {
 public:
  explicit DataPool(const PeerSecurity* security) : security_(security) {}
  // An idle connection to `addr`, or a new one: a refused connection is tried again until
  // `connect_by` only (its daemon is dead or restarting), the handshake gets its own time.
  Status Take(const std::string& addr, Deadline connect_by, Conn* out);
  void Return(const std::string& addr, Conn conn);

 private:
  const PeerSecurity* security_;
  std::mutex mu_;
  std::map<std::string, std::vector<Conn>> idle_;
};

// One Fetch on a data connection: Open, then Read the bytes in order.
class FetchStream {
 public:
  explicit FetchStream(DataPool* pool) : pool_(pool) {}
  ~FetchStream();

  // `stop_by` ends the wait early (see FetchInto); Never: only the timeout does.
  Status Open(const std::string& sender, const std::string& id, uint64_t offset, int timeout_ms,
              Deadline stop_by = Deadline::Never());
  uint64_t size() const { return size_; }
  // Reads exactly len bytes (each byte may wait up to timeout_ms for the sender, and not
  // past `stop_by`).
  Status Read(uint8_t* dst, size_t len, Deadline stop_by = Deadline::Never());
  // Aborts a Read in progress from another thread (reduce cancellation).
  void Abort();
  // After the last byte: the connection goes back to the pool.
  void Finish();

 private:
  DataPool* pool_;
  std::string sender_;
  std::mutex fd_mu_;  // fd_ changes (Open, Finish) vs Abort from another thread
  bool aborted_ = false;
  Conn conn_;
  uint64_t size_ = 0;
  uint64_t left_ = 0;
  int timeout_ms_ = 0;
  bool broken_ = false;
};

// The pipelining unit for an object of `size` bytes: `block_bytes` (--object-block-bytes),
// but at most a 16th of the object, so that a hop forwards a small object's first bytes
// long before it has all of them, and at least 32 KiB, below which each block's messages
// cost more than the pipelining gains (measured: docs/benchmarks.md).
size_t PipelineBlock(size_t block_bytes, uint64_t size);

// Fetches [*offset, obj.size) of obj's id from `sender` into obj, advancing *offset and the
// object's ready mark every `block` bytes but the last (the caller marks the copy complete,
// which makes them readable). On failure *offset says where to resume. When `stop_by`
// passes first, the transfer stops there with *stopped set (the connection is dropped:
// the block in progress is fetched again by whoever resumes from *offset).
Status FetchInto(DataPool* pool, const std::string& sender, LocalObject* obj, uint64_t* offset, size_t block,
                    int timeout_ms, Deadline stop_by, bool* stopped);

// Counters of transfers, for the object state (tests check the broadcast tree's shape), and
// the link bandwidth they showed (eq. 2.1's B for the reduce degree).
struct TransferStats {
  std::atomic<uint64_t> served{0};    // fetches of a whole object (from offset 0) served
  std::atomic<uint64_t> resumed{0};   // fetches served from a later offset (a resume)
  std::atomic<uint64_t> received{0};  // objects this daemon fetched completely

  // A whole transfer of `bytes` in `secs`, sent or received; only transfers >= 1 MiB count
  // (smaller ones measure latency, not bandwidth).
  void NoteTransfer(uint64_t bytes, double secs);
  // Bytes/s, smoothed; 0 before the first transfer.
  double bandwidth_Bps() const;

 private:
  mutable std::mutex bw_mu_;
  double bandwidth_Bps_ = 0;
};

// Serves Fetch requests on one (authenticated) data connection until it closes.
void ServeFetches(Conn conn, LocalStore* store, int timeout_ms, const std::string& remote, TransferStats* stats);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_TRANSFER_H_
