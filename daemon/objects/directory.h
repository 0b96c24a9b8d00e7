// DirectoryShard: the part of Hoplite's object directory this daemon owns (the ids the
// consistent-hash ring maps here). Per object it keeps the size, small objects' bytes
// (served inline), and every location with its state: partial or complete, whether it is
// the origin (Put/Reduce) copy, which sender it is fetching from, and whether it is busy
// sending. It answers:
//  * Acquire (synchronous location query of a receiver): picks one free location, complete
//    ones first, never one whose upstream chain contains the receiver (no cyclic fetches),
//    marks it busy until the receiver Releases it, and records the receiver as a partial
//    location fetching from it: receiver-driven broadcast trees grow from this.
//    With no free location the request waits (bounded by its timeout).
//  * Subscribe (asynchronous location query): pushes an event for every location.
//  * A Put's new small object (up to --object-store-copy-bytes) is handed
//    to every other live daemon (DirStoreCopy), each listed as a complete location: their
//    programs' Gets are then answered where they ask, without a round trip here, and a
//    Delete reaches those copies as it reaches every other (DropCopy).
//  * Publish / Unpublish / Release / Delete / Count. A Reduce coordinator reserves its target
//    id before the size is known (a create fails with kExists meanwhile).
// Each entry keeps the object's owner (access.h) from its creating Publish and hands it out
// with every answer, so the daemon asking can check its program's read access; Delete names
// the uid it is for and is refused unless that uid owns the object or the asking daemon
// vouches for an operator.
// Directory state is soft: when the ring changes, every daemon re-publishes its copies to
// the new owners, and an owner drops what it no longer owns (its waiters are told to
// retry). When the last complete copy of an object dies (and its creator is gone), the
// remaining partial copies are told the object is lost.
#ifndef CONDUIT_DAEMON_OBJECTS_DIRECTORY_H_
#define CONDUIT_DAEMON_OBJECTS_DIRECTORY_H_

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "objects/peers.h"

namespace conduit::objects {

// What the holders and readers of an object get once a shard declares it lost (DropCopy
// with reason lost, or the Acquire of a holder resuming its fetch).
Status ObjectLost(const std::string& id);

class DirectoryShard {
 public:
  // Put's objects of at most `store_copy_bytes` (--object-store-copy-bytes; 0: none) are
  // handed to every live daemon when they are created (DirStoreCopy).
  DirectoryShard(Peers* peers, uint64_t store_copy_bytes);
  // Registers the directory's message handlers with `peers` (before Peers::Start).
  void Register();
  // Drops dead daemons' locations and the entries this daemon no longer owns.
  void OnMembershipChange();
  std::string StateJson();

 private:
  struct Loc {
    bool complete = false;
    bool origin = false;
    std::string busy_with;  // receiver this location is sending to
    std::string upstream;   // sender this (partial) location is fetching from
    bool handed = false;    // the shard handed this daemon the bytes (DirStoreCopy)
  };
  struct Waiter {
    objproto::Acquire req;
    std::string requester;
    ReplyFn reply;
    Deadline deadline = Deadline::Never();
  };
  struct Sub {
    std::string from;
    uint64_t sub;
    ReplyFn push;
  };
  struct Entry {
    uint64_t size = 0;
    bool has_inline = false;
    Bytes inline_data;
    std::map<std::string, Loc> locs;
    std::vector<Waiter> waiters;
    std::vector<Sub> subs;
    // A complete or origin copy was registered here: only then can its loss be seen (an
    // entry rebuilt from re-published partial copies may just not have heard of its
    // origin yet).
    bool had_source = false;
    // When the last complete or origin copy went (only partial copies left): the loss is
    // declared once that has lasted kLostConfirm, so a copy re-registered meanwhile (its
    // daemon reconnected, or replaced itself, and published again) saves the object.
    std::optional<std::chrono::steady_clock::time_point> sources_gone_since;
    // The daemon that reserved the id for a Reduce target, until it publishes a location.
    std::string reserved_by;
    // From the creating Publish (or, for an entry rebuilt after the ring changed, the first
    // re-publication); access 0 while unknown.
    objproto::Owner owner{};
    bool empty() const {
      return locs.empty() && !has_inline && waiters.empty() && subs.empty() && reserved_by.empty();
    }
  };
  using Actions = std::vector<std::function<void()>>;

  void OnPublish(const std::string& from, const Bytes& body, const ReplyFn& reply);
  void OnUnpublish(const std::string& from, const Bytes& body);
  void OnAcquire(const std::string& from, const Bytes& body, const ReplyFn& reply);
  void OnRelease(const std::string& from, const Bytes& body);
  void OnSubscribe(const std::string& from, const Bytes& body, const ReplyFn& reply);
  void OnUnsubscribe(const std::string& from, const Bytes& body);
  void OnDelete(const Bytes& body, const ReplyFn& reply);
  // Sends a Delete's DropCopy to `holders` and runs `then` once they have dropped their copies.
  void DropHolders(const std::string& id, const objproto::Id& wire_id, const std::vector<std::string>& holders,
                   std::function<void()> then);
  void OnCount(const Bytes& body, const ReplyFn& reply);
  void SweepLoop();

  bool Owned(const std::string& id) const;
  // The daemons a Publish's small object is handed to (none unless it is a Put's new
  // object of at most store_copy_bytes_): every live one but `where` that speaks version 4.
  std::vector<std::string> StoreCopyTargets(const objproto::Publish& p, const std::string& where) const;
  // Lists each of `to` as a complete location of e and sends it the bytes.
  void HandOutCopies(const std::string& id, Entry& e, const std::vector<std::string>& to, Actions* out);
  // Hands a free location to a waiting receiver; false when none fits.
  bool TryServe(const std::string& id, Entry& e, const Waiter& w, Actions* out);
  void ServeWaiters(const std::string& id, Entry& e, Actions* out);
  void Notify(const std::string& id, Entry& e, const std::string& where, bool complete, Actions* out);
  // A location event for one subscriber (with a small complete object's bytes).
  static Bytes EventBody(uint64_t sub, const std::string& id, const Entry& e, const std::string& where, bool complete);
  // Notes the loss of an object only partial copies are left of, and declares it (drops
  // the partial copies, tells their holders) once it has lasted kLostConfirm.
  void CheckLost(const std::string& id, Entry& e, Actions* out);
  bool InChain(const Entry& e, const std::string& start, const std::string& requester) const;
  void FreeBusy(Entry& e, const std::string& receiver);

  Peers* peers_;
  const uint64_t store_copy_bytes_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_DIRECTORY_H_
