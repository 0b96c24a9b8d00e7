// ReplyPage: one page of shared memory per program connection through which conduitd puts
// the reply to a host Group request, where the program waits for it, instead of sending it
// as a frame on the Unix socket (shim protocol v3, kAttachReplyPage; docs/shim-protocol.md,
// "Replies through the reply page").
//
// Why: a program's wait for its reply is the last step of every small collective. A frame
// on a Unix socket costs a sendmsg, a poll that sees it and two recvmsg (its header, then
// its payload), with kernel buffers that one CPU allocates and the other frees. On the
// benchmark VM a request and reply between two processes spinning on two CPUs took
// 5.1-7.3 us that way, 2.1-3.1 us with the reply in shared memory (docs/benchmarks.md,
// "The reply page").
//
// The exchange. The program sets kGroupReplyInPage on a Group request (host groups, not
// streamed) once the daemon accepted its page. The daemon then writes the reply here
// (type, len, payload) and stores the number of replies it has put here so far in `seq`
// (release). The program spins on `seq` for its budget (common/busy_poll.h); before it
// blocks in poll(2) on its socket it sets `waiting` to 1. The daemon, after storing `seq`,
// takes `waiting` (exchange with 0) and, if it was 1, sends a kReplyInPage frame that wakes
// the program. Whoever takes `waiting` back first decides: the program, finding the reply
// after it set `waiting`, takes it back too; if it then reads 0 the daemon took it first and
// a kReplyInPage frame is on its way, which the program reads. So every kReplyInPage frame
// is read, and no reply waits for a wake-up that never comes.
//
// Trust. The daemon never reads what the program wrote here but `waiting`, which only
// decides whether it sends one more frame; it writes `seq` from its own count. The page is a
// memfd sealed against shrinking (common/shm_segment.h), so the program cannot truncate it
// under the daemon. A daemon that has no page for the connection (one that predates it)
// answers on the socket, which the program also watches while it waits.
#ifndef CONDUIT_PROTOCOL_REPLY_PAGE_H_
#define CONDUIT_PROTOCOL_REPLY_PAGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace conduit {

inline constexpr size_t kReplyPageBytes = 4096;
inline constexpr size_t kReplyPageHeadBytes = 64;
inline constexpr size_t kReplyPagePayloadBytes = kReplyPageBytes - kReplyPageHeadBytes;

struct ReplyPage {
  std::atomic<uint32_t> seq;      // daemon: replies put here so far (stored after the reply)
  std::atomic<uint32_t> waiting;  // program: 1 while it may block on its socket
  uint32_t type;                  // the reply's frame type (shimproto::kGroupReply)
  uint32_t len;                   // the reply's payload bytes, at most kReplyPagePayloadBytes
  uint8_t reserved[kReplyPageHeadBytes - 16];
  uint8_t payload[kReplyPagePayloadBytes];
};
static_assert(sizeof(ReplyPage) == kReplyPageBytes);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline ReplyPage* ReplyPageOf(uint8_t* page) { return reinterpret_cast<ReplyPage*>(page); }

// Daemon side: puts reply number `count` (1, 2, ...: one more than the last) of `len`
// bytes, which must fit. Returns whether the program asked to be woken (then the caller
// sends it a kReplyInPage frame).
inline bool PutReplyInPage(ReplyPage* page, uint32_t count, uint16_t type, const void* payload, size_t len) {
  page->type = type;
  page->len = static_cast<uint32_t>(len);
  if (len > 0) memcpy(page->payload, payload, len);
  // Both sequentially consistent, as the program's store of `waiting` and its load of `seq`:
  // of the two orders, at least one side sees the other's write.
  page->seq.store(count, std::memory_order_seq_cst);
  return page->waiting.exchange(0, std::memory_order_seq_cst) != 0;
}

// Program side: whether reply number `count` is in place.
inline bool ReplyInPage(const ReplyPage* page, uint32_t count) {
  return page->seq.load(std::memory_order_seq_cst) == count;
}

// Program side, once its spin is over: from now on it may sleep on its socket.
inline void AnnounceSleep(ReplyPage* page) { page->waiting.store(1, std::memory_order_seq_cst); }

// Program side, right after AnnounceSleep: its last look at the page before it sleeps.
enum class LastLook {
  kSleep,               // no reply yet: sleep on the socket (a kReplyInPage frame or the reply comes)
  kTake,                // the reply is here, and nothing is owed on the socket
  kTakeAfterWakeFrame,  // the reply is here, and the daemon's kReplyInPage frame is owed: read it
};
inline LastLook LookBeforeSleep(ReplyPage* page, uint32_t count) {
  if (!ReplyInPage(page, count)) return LastLook::kSleep;
  // Taking `waiting` back decides: if the daemon took it first, it sends a frame.
  return page->waiting.exchange(0, std::memory_order_seq_cst) == 0 ? LastLook::kTakeAfterWakeFrame : LastLook::kTake;
}

// Program side, woken by a frame on its socket after LastLook::kSleep: takes `waiting`
// back and says whether the daemon had taken it (then the frame is its kReplyInPage).
inline bool DaemonTookWaiting(ReplyPage* page) { return page->waiting.exchange(0, std::memory_order_seq_cst) == 0; }

}  // namespace conduit

#endif  // CONDUIT_PROTOCOL_REPLY_PAGE_H_
