// libhoplite: a Hoplite-style distributed object store, served by conduitd.
//
// Programs on any host Put immutable objects under string ids and Get (or Reduce) them
// from anywhere. The local conduitd keeps object bytes in shared memory; the daemons find
// copies through a directory sharded over all of them, pipeline transfers block by block
// (a receiver may read from a sender that is itself still receiving), build broadcast
// trees from the order receivers arrive in, reduce along trees whose degree fits object
// size and network, and route around daemons and programs that die.
//
// A Client is one connection to the local daemon ($CONDUIT_SOCKET or
// /run/conduit/conduitd.sock). Calls on one Client run one at a time (they are serialized
// by a lock); use one Client per thread for concurrent calls. Every call is bounded: a
// timeout of 0 means the daemon's own bound (conduitd --timeout-ms).
//
// Objects belong to the user (uid) whose program created them. Only the owner and the
// operators (root, the daemons' users and their --admin-uid) may delete an object; who
// else may read it (Get, Wait, Reduce from it) the creator chooses with Access. Each daemon
// caps what one user's programs create on it (kOverQuota).
#ifndef CONDUIT_HOPLITE_H_
#define CONDUIT_HOPLITE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hoplite_export.h"

namespace hoplite {

// Result codes; the C ABI and the Python package use the same numbers.
enum class Code : int {
  kOk = 0,
  kTimeout = 1,       // the object (or enough Reduce sources) did not appear in time
  kNotFound = 2,      // the object was deleted
  kExists = 3,        // Put of an id that exists (objects are immutable)
  kOutOfMemory = 4,   // the local store is full and nothing can be evicted
  kInvalid = 5,       // bad arguments
  kLost = 6,          // every complete copy died (or its creator died mid-Put)
  kUnavailable = 7,   // no daemon, or lost contact with it
  kInternal = 9,
  kRefused = 10,      // the daemon's policy refuses this program
  kPermissionDenied = 11,  // this program's user may not read (or delete) the object
  kOverQuota = 12,    // this program's user has used its share of the local store
};

// Who may read an object besides its owner and the operators.
enum class Access : int {
  kDefault = 0,  // the daemon's choice (conduitd --object-default-access; owner unless set)
  kOwner = 1,    // the owner only
  kGroup = 2,    // also users in the owner's (primary) group
  kWorld = 3,    // every user on every host
};

class HOPLITE_API Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Same values as ncclRedOp_t / ncclDataType_t.
enum class ReduceOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };
enum class DataType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9, kFloat8e4m3 = 10, kFloat8e5m2 = 11,
};

// A read-only view of a complete object: for large objects a mapping of the local store's
// shared memory (no copy; it cannot be written), for small ones the bytes themselves.
// The store keeps the copy while a view exists.
class HOPLITE_API ObjectView {
 public:
  virtual ~ObjectView() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

class HOPLITE_API Client {
 public:
  // Connects to the daemon; socket_path "" means $CONDUIT_SOCKET or the default path.
  static Status Connect(std::unique_ptr<Client>* out, const std::string& socket_path = "");
  virtual ~Client() = default;

  // Creates object `id` with a copy of data[0, size), owned by this program's user and
  // readable as `access` says. Receivers anywhere may start reading it while it is being
  // copied in; once Put returns its bytes can no longer change.
  virtual Status Put(const std::string& id, const void* data, size_t size, Access access = Access::kDefault) = 0;
  // Waits for the object and copies it. `alloc(size)` returns where to put it (called once,
  // before the first byte; it may return nullptr only for size 0). The copy pipelines with
  // the object's arrival.
  virtual Status Get(const std::string& id, const std::function<void*(size_t size)>& alloc, int timeout_ms = 0) = 0;
  Status Get(const std::string& id, std::vector<uint8_t>* out, int timeout_ms = 0);
  // Waits for the complete object and maps it read-only (zero copy).
  virtual Status GetReadOnly(const std::string& id, std::shared_ptr<const ObjectView>* out, int timeout_ms = 0) = 0;
  // Deletes every copy of the object (its owner or an operator only).
  virtual Status Delete(const std::string& id) = 0;
  // Creates `target` = op over `num_objects` of `sources` (element type dtype), using the
  // first ones to become available; *used gets their indices in `sources`, in arrival
  // order. Returns when the result is complete on this host. The target belongs to this
  // program's user, readable as `access` says; every source used must be readable by it.
  virtual Status Reduce(const std::string& target, const std::vector<std::string>& sources, size_t num_objects,
                        ReduceOp op, DataType dtype, int timeout_ms = 0, std::vector<size_t>* used = nullptr,
                        Access access = Access::kDefault) = 0;
  // Waits until `num_ready` of `ids` have a complete copy somewhere; *ready gets the indices
  // of those that are ready, in the order they became ready (at least num_ready of them).
  virtual Status Wait(const std::vector<std::string>& ids, size_t num_ready, int timeout_ms,
                      std::vector<size_t>* ready) = 0;
  Status WaitAny(const std::vector<std::string>& ids, int timeout_ms, size_t* index);
  // The local daemon's object state as JSON (live daemons, local copies, directory shard).
  virtual Status State(std::string* json) = 0;
};

}  // namespace hoplite

#endif  // CONDUIT_HOPLITE_H_
