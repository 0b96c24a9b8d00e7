// Mailbox: matches point-to-point sends with receives inside one daemon.
//
// Messages are matched in order per (source rank, destination rank), as NCCL orders them.
// A local sender's message points into its shared segment and the sender waits until a
// receiver has copied it; a message that arrived from another daemon owns its bytes. A
// local send of device memory may instead name the sender's GPU buffer (DeviceSource):
// the receiver takes it and copies it with the GPU, then completes the sender's ticket.
//
// The sender's program may reuse or unmap its segment as soon as its send returns, so a
// local message never outlives its send: a send that fails or times out withdraws its
// message (waiting out a copy already under way), and a failed mailbox drops every local
// message and delivers nothing more.
//
// A message from another daemon was sent as soon as it was written (its sender does not
// wait for the receive), so what arrived and waits here is capped: a program that sends
// and never receives, or another host that floods, would otherwise grow the daemon without
// bound. Its reader reserves room from the message's header, before it reads the bytes
// (ReserveRemote): a message comes in when it fits under the cap, or whatever its size
// when a receive of exactly its length is posted for it (Expect: a rank's group registers
// its receives before it runs, so an exchange of any size among ranks that all receive
// goes through). Otherwise the reader waits for room or for that receive, the link waits
// with it, and TCP makes the sender wait in turn, as NCCL's sends wait for their receives.
//
// A message whose posted receive named its buffer (Expect with `into`) is read straight
// into that buffer: no memory of the daemon's and no copy when the receive takes it. A
// receive posted while its message comes in takes over the rest of it (RetargetRemote;
// the reader copies what came before). The buffer is the receiving rank's segment (or
// region, or pinned staging), mapped while its group runs, so the group's end
// (ForgetExpected) waits for a fill under way and moves a filled message nobody took into
// the daemon's own memory, where a later receive finds it as any other.
#ifndef CONDUIT_DAEMON_COLLECTIVES_MAILBOX_H_
#define CONDUIT_DAEMON_COLLECTIVES_MAILBOX_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace conduit {

// Completion of one local send: a receiver is copying it (taken), or the copy is done or
// failed (done).
struct SendTicket {
  bool taken = false;
  bool done = false;
  Status status;
};

// A local send of device memory, read where it is by the receiver's GPU copy: the sender's
// buffer as mapped in this daemon, whose bytes are final (the sender's stream reached the
// group before it was posted), and the mappings that keep it there while a copy may read it.
struct DeviceSource {
  uint64_t ptr = 0;
  int device = -1;
  std::vector<std::shared_ptr<const void>> keep;
};

// What Take matched: host bytes already copied (device == nullptr), or a device message
// whose copy is the taker's, to be reported with Complete(ticket, status).
struct TakenMessage {
  std::shared_ptr<const DeviceSource> device;
  std::shared_ptr<SendTicket> ticket;
};

// A message from another daemon that waits for its receive (handed over in a live upgrade).
struct ArrivedMessage {
  int src = 0;
  int dst = 0;
  std::vector<uint8_t> bytes;
};

class Mailbox {
 public:
  // What a message from another daemon counts against the cap beyond its bytes: its queue
  // entry, so that empty messages cannot pile up uncounted.
  static constexpr uint64_t kRemoteEntryBytes = 64;

  // `remote_cap`: the bytes of messages from other daemons that may wait here (with
  // kRemoteEntryBytes each) beyond those a posted receive expects.
  explicit Mailbox(uint64_t remote_cap = uint64_t{1} << 30) : remote_cap_(remote_cap) {}

  // A local rank's message; `ticket` is signalled when a receiver consumed it.
  void PostLocal(int src, int dst, const uint8_t* data, size_t len, std::shared_ptr<SendTicket> ticket);
  // A local rank's send of `len` bytes of device memory (DeviceSource).
  void PostLocalDevice(int src, int dst, std::shared_ptr<const DeviceSource> source, size_t len,
                       std::shared_ptr<SendTicket> ticket);
  // Room for the next message from src to dst, of `len` bytes, from another daemon: waits
  // until it fits under the cap or a receive of that length is posted for it; fails (with
  // the reason to abort on) when the mailbox failed or the deadline passed first. One
  // reader per source host, which posts (PostRemote) each message it reserved before it
  // reserves the next; a reservation whose bytes never come is ended by the link's
  // failure, which fails the mailbox. When the posted receive named its buffer, *into is
  // set to it: the reader writes the bytes there and ends with FilledRemote instead of
  // PostRemote (*into is null otherwise).
  Status ReserveRemote(int src, int dst, size_t len, Deadline deadline, uint8_t** into);
  // The reserved message, arrived.
  void PostRemote(int src, int dst, std::vector<uint8_t> bytes);
  // The reserved message, being read into the reader's own memory: the buffer of a
  // receive posted for it since, if one was (null otherwise). The reader then copies what
  // it read so far there, reads the rest there too and ends with FilledRemote.
  uint8_t* RetargetRemote(int src, int dst);
  // The reserved message read into its receive's buffer: whole, or cut off (the link
  // failed; its receive fails). Also ends a message read into the reader's memory that
  // was cut off.
  void FilledRemote(int src, int dst, bool whole);
  // Rank dst will receive `len` bytes from src, after the receives it registered before:
  // such a message comes in whatever the cap. `into` (or null): the receive's buffer,
  // valid until ForgetExpected(dst); its message is read straight into it. Take consumes
  // the expectation it matches; ForgetExpected(dst) drops those left when dst's group
  // ends, after waiting for the fills of dst's buffers under way (bounded by their link's
  // deadline) and moving filled messages not taken into the daemon's memory.
  void Expect(int src, int dst, size_t len, uint8_t* into = nullptr);
  // Names the buffer of the `index`th receive dst expects from src (counted from the
  // first not yet taken), for a receive whose buffer is known only after its Expect (a
  // device receive's pinned staging). A message already on its way is not moved.
  void NameReceiveBuffer(int src, int dst, size_t index, uint8_t* into);
  void ForgetExpected(int dst);
  // Puts back a message handed over in a live upgrade, whatever the cap (it was under the
  // old daemon's).
  void RestoreArrived(ArrivedMessage message);
  // The bytes of messages from other daemons that wait here (kRemoteEntryBytes each
  // included), and the most that ever did at once.
  uint64_t remote_bytes() const;
  uint64_t remote_peak_bytes() const;
  // Copies the next message from src to dst into `out`; its length must equal `len`. A
  // device message of the right length is handed to the caller in *taken with its ticket
  // taken: the sender waits until the caller's Complete, which must follow on every path
  // (the sender's mapping stays valid until then). With `taken` null (a receiver that
  // cannot take device memory) a device message fails.
  // *copied (when not null) says whether the bytes were copied into `out` here (not read
  // there by a link's reader).
  Status Take(int src, int dst, uint8_t* out, size_t len, Deadline deadline, TakenMessage* taken,
              bool* copied = nullptr);
  // Ends a taken device message's send with `status`.
  void Complete(const std::shared_ptr<SendTicket>& ticket, const Status& status);
  // Waits for a local send to be consumed. When it returns the message is gone from the
  // mailbox whatever the outcome: on a failure or timeout it is withdrawn unread.
  Status WaitSent(const std::shared_ptr<SendTicket>& ticket, Deadline deadline);
  // Fails every waiter now and later with `status`; local messages not yet taken are
  // dropped (their senders hear `status`).
  void Fail(const Status& status);
  // Copies of the messages from other daemons not yet received, in arrival order per
  // (src, dst); an error when a local rank's send is still queued (it is in a request).
  Status ExportArrived(std::vector<ArrivedMessage>* out);

 private:
  // A message from another daemon holds its place in the queue from its reservation:
  // kReading while its reader reads it into memory of its own (PostRemote makes it kNone),
  // or, read into its receive's buffer (data), kFilling while the reader writes it, then
  // kFilled; kBroken (data null) when its link failed first.
  enum class Fill { kNone, kReading, kFilling, kFilled, kBroken };
  struct Message {
    const uint8_t* data;
    size_t len;
    std::vector<uint8_t> owned;
    std::shared_ptr<SendTicket> ticket;
    std::shared_ptr<const DeviceSource> device;  // a local device send: data is null
    uint64_t counted = 0;                        // from another daemon: its part of remote_bytes_
    Fill fill = Fill::kNone;
  };
  struct Posted {
    size_t len;
    uint8_t* into;
  };

  // Removes the queued message of `ticket`, if it is still queued. Under mu_.
  void Withdraw(const std::shared_ptr<SendTicket>& ticket);
  // The message from src to dst its reader is reading (kReading or kFilling), or null.
  // Under mu_.
  Message* BeingRead(int src, int dst);
  // The receive from src to dst at `index` among those posted and not yet matched (the
  // queue's order: message i is taken by receive i), if it is of `len` bytes; else null.
  // Under mu_.
  const Posted* PostedAt(int src, int dst, size_t index, size_t len) const;
  // The posted receive the next message from src to dst, of `len` bytes, matches, or
  // null. Under mu_.
  const Posted* Expected(int src, int dst, size_t len) const;

  // Wakes the waiters (under mu_), and a Take spinning for its message.
  void Wake() {
    events_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

  const uint64_t remote_cap_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> events_{0};  // Wake()s so far, for a Take spinning outside mu_
  std::map<std::pair<int, int>, std::deque<Message>> queues_;
  uint64_t remote_bytes_ = 0;  // of the queued and reserved messages from other daemons
  uint64_t remote_peak_ = 0;
  // Readers waiting for room: only then do receives and Expect wake the waiters (a wake-up
  // of every rank waiting for a message costs more than the small receive that caused it).
  int reserving_ = 0;
  // Per (src, dst): the receives posted and not yet matched, in order.
  std::map<std::pair<int, int>, std::deque<Posted>> expected_;
  Status failed_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_MAILBOX_H_
