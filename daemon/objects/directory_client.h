// DirectoryClient: how this daemon talks to the directory shard owning an object (itself
// or another daemon, chosen by the hash ring). Calls retry while the owner is moving or
// just died, until their deadline; subscriptions (asynchronous location queries) are
// re-sent to the new owner when the ring changes.
#ifndef CONDUIT_DAEMON_OBJECTS_DIRECTORY_CLIENT_H_
#define CONDUIT_DAEMON_OBJECTS_DIRECTORY_CLIENT_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "objects/peers.h"

namespace conduit::objects {

struct AcquireResult {
  uint64_t size = 0;
  std::string sender;  // empty when the bytes came inline
  Bytes inline_data;
  bool is_inline = false;
  objproto::Owner owner{};
};

class DirectoryClient {
 public:
  // A location event; `inline_data` holds a small complete object's bytes (else empty).
  using EventFn = std::function<void(const objproto::DirEvent& ev, const Bytes& inline_data)>;

  explicit DirectoryClient(Peers* peers);
  void Start();  // the resubscription thread

  // Every publication names the object's owner (access.h): the directory entry keeps it and
  // hands it to every daemon that asks about the object.
  Status Publish(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                    const objproto::Owner& owner, Deadline deadline);
  // Publish in two halves: Begin sends it, Finish waits for the answer (re-asking a moved
  // shard's new owner), so the caller can send other requests in between.
  struct PendingPublish {
    std::string id;
    Bytes body;
    Peers::Outstanding call;
  };
  PendingPublish PublishBegin(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                              const objproto::Owner& owner);
  Status PublishFinish(PendingPublish& p, Deadline deadline);
  // Fire-and-forget publication (re-publication of soft state to a new owner).
  void PublishAsync(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                    const objproto::Owner& owner);
  void Unpublish(const std::string& id);
  // Synchronous location query: blocks until a sender is handed out (or inline bytes).
  Status Acquire(const std::string& id, const std::string& prev_sender, const std::string& avoid,
                    Deadline deadline, AcquireResult* out);
  void Release(const std::string& id, const std::string& sender, bool receiver_complete);
  // Deletes on behalf of a program of `uid`; the shard refuses (kPermissionDenied) unless
  // that uid owns the object or `as_operator` (this daemon checked it is an operator).
  Status Delete(const std::string& id, uint32_t uid, bool as_operator, Deadline deadline);
  Status CountComplete(const std::string& id, Deadline deadline, uint32_t* complete);

  // Asynchronous location query: `fn` runs (on the peers' executor) for every location event.
  uint64_t Subscribe(const std::string& id, EventFn fn);
  void Unsubscribe(uint64_t handle);

  // Wiring: pushed frames from Peers, ring changes from the service.
  void OnPush(uint16_t type, const Bytes& body);
  void OnMembershipChange();

 private:
  struct Watch {
    std::string id;
    EventFn fn;
    std::string owner;  // where the subscription was sent, "" to resend
  };
  Bytes PublishBody(const std::string& id, uint64_t size, uint32_t flags, const Bytes& inline_data,
                    const objproto::Owner& owner);
  Status CallOwner(const std::string& id, uint16_t type, const Bytes& body, uint16_t reply_type, Bytes* reply,
                      Deadline deadline);
  void ResubscribeLoop();
  void SendSubscribe(uint64_t handle, Watch& w);

  Peers* peers_;
  std::mutex mu_;
  uint64_t next_handle_ = 1;
  std::map<uint64_t, Watch> watches_;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_DIRECTORY_CLIENT_H_
