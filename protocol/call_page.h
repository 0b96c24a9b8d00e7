// CallPage: one page of shared memory per program connection through which one side puts
// a message where the other side waits for it, instead of sending it as a frame on the
// Unix socket (docs/shim-protocol.md, "Replies through the reply page" and "Requests
// through the request page"). A connection has two, each written by one side only:
//   - the reply page (kAttachReplyPage): conduitd puts the reply to a host Group request,
//     the program waits for it;
//   - the request page (kAttachRequestPage): the program puts a host Group request,
//     conduitd's session waits for it.
//
// Why: a frame on a Unix socket costs a sendmsg, a poll that sees it and two recvmsg (its
// header, then its payload), with kernel buffers that one CPU allocates and the other
// frees. On the benchmark VM a request and reply between two processes spinning on two
// CPUs took 5.1-7.3 us that way, 2.1-3.1 us with the reply in shared memory and 0.4-0.75 us
// with both there (docs/benchmarks.md, "The reply page").
//
// The exchange, the same in both directions. The writer puts the message (type, len,
// payload) and stores the number of messages it has put so far in `seq`. The reader spins
// on `seq` for its budget (common/busy_poll.h); before it blocks in poll(2) on its socket
// it sets `waiting` to 1 and looks once more. The writer, after storing `seq`, takes
// `waiting` (exchange with 0) and, if it was 1, sends a wake frame on the socket
// (kReplyInPage, kRequestInPage). Whoever takes `waiting` back first decides: the reader,
// finding the message after it set `waiting`, takes it back too; if it then reads 0 the
// writer took it first and a wake frame is on its way. So no message waits for a wake-up
// that never comes. A wake frame may be late: the writer can be descheduled between storing
// message n's `seq` and taking `waiting`, while the reader takes message n, and asks to be
// woken for message n+1; that exchange then takes the new `waiting`. A reader woken with its
// message not yet in the page waits again; each frame still answers one taking of `waiting`.
//
// Trust. Each side reads of the other's page only what it must and checks it: the program
// copies a reply of at most kCallPagePayloadBytes; conduitd copies a request out of the
// page before it parses it, takes only the next one in sequence, and reads nothing else of
// the reply page but `waiting`, which only decides whether it sends one more frame. A page
// is a memfd sealed against shrinking (common/shm_segment.h), so neither side can truncate
// it under the other. A daemon that has no page for the connection (one that predates
// them) answers on the socket, which the program also watches while it waits.
#ifndef CONDUIT_PROTOCOL_CALL_PAGE_H_
#define CONDUIT_PROTOCOL_CALL_PAGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace conduit {

inline constexpr size_t kCallPageBytes = 4096;
inline constexpr size_t kCallPageHeadBytes = 64;
inline constexpr size_t kCallPagePayloadBytes = kCallPageBytes - kCallPageHeadBytes;

struct CallPage {
  std::atomic<uint32_t> seq;      // writer: messages put here so far (stored after the message)
  std::atomic<uint32_t> waiting;  // reader: 1 while it may block on its socket
  // Atomic, although only the writer stores them, so that each is one load the reader checks
  // and then uses: the other process may write them at any time, and a plain field could
  // legally be loaded again by the compiler after its check (a double fetch).
  std::atomic<uint32_t> type;     // the message's frame type (kGroupReply, kGroup)
  std::atomic<uint32_t> len;      // the message's payload bytes, at most kCallPagePayloadBytes
  uint8_t reserved[kCallPageHeadBytes - 16];
  uint8_t payload[kCallPagePayloadBytes];
};
static_assert(sizeof(CallPage) == kCallPageBytes);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline CallPage* CallPageOf(uint8_t* page) { return reinterpret_cast<CallPage*>(page); }

// Writer, the first half of PutInPage: stores message number `count` (1, 2, ...: one more
// than the last) of `len` bytes, which must fit, then its `seq`.
inline void StoreInPage(CallPage* page, uint32_t count, uint16_t type, const void* payload, size_t len) {
  page->type.store(type, std::memory_order_relaxed);
  page->len.store(static_cast<uint32_t>(len), std::memory_order_relaxed);
  if (len > 0) memcpy(page->payload, payload, len);
  // Both sequentially consistent, as the reader's store of `waiting` and its load of `seq`:
  // of the two orders, at least one side sees the other's write.
  page->seq.store(count, std::memory_order_seq_cst);
}

// Writer, the second half: whether the reader asked to be woken (then the caller sends it
// the wake frame). A writer descheduled between the halves makes the late wake frame of
// the header's comment.
inline bool TakeWakeRequest(CallPage* page) { return page->waiting.exchange(0, std::memory_order_seq_cst) != 0; }

// Writer: both halves at once.
inline bool PutInPage(CallPage* page, uint32_t count, uint16_t type, const void* payload, size_t len) {
  StoreInPage(page, count, type, payload, len);
  return TakeWakeRequest(page);
}

// Reader: whether message number `count` is in place.
inline bool InPage(const CallPage* page, uint32_t count) {
  return page->seq.load(std::memory_order_seq_cst) == count;
}

// Reader, once its spin is over: from now on it may sleep on its socket.
inline void AnnounceSleep(CallPage* page) { page->waiting.store(1, std::memory_order_seq_cst); }

// Reader, right after AnnounceSleep: its last look at the page before it sleeps.
enum class LastLook {
  kSleep,               // nothing yet: sleep on the socket (a wake frame or the message comes)
  kTake,                // the message is here, and nothing is owed on the socket
  kTakeAfterWakeFrame,  // the message is here, and the writer's wake frame is owed
};
inline LastLook LookBeforeSleep(CallPage* page, uint32_t count) {
  if (!InPage(page, count)) return LastLook::kSleep;
  // Taking `waiting` back decides: if the writer took it first, it sends a frame.
  return page->waiting.exchange(0, std::memory_order_seq_cst) == 0 ? LastLook::kTakeAfterWakeFrame : LastLook::kTake;
}

// Reader, woken by a frame on its socket after LastLook::kSleep: takes `waiting` back and
// says whether the writer had taken it (then the frame is its wake frame).
inline bool WriterTookWaiting(CallPage* page) { return page->waiting.exchange(0, std::memory_order_seq_cst) == 0; }

}  // namespace conduit

#endif  // CONDUIT_PROTOCOL_CALL_PAGE_H_
