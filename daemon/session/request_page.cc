#include "session/request_page.h"

#include <poll.h>

#include <chrono>
#include <cstring>

#include "common/busy_poll.h"
#include "protocol/call_page.h"
#include "protocol/shim_protocol.h"

namespace conduit {

Status RequestPage::Attach(UniqueFd fd, uint32_t taken) {
  fd_.reset();
  taken_ = 0;
  // Sealed against shrinking, at least one page (ShmSegment::Map checks both).
  CONDUIT_RETURN_IF_ERROR(page_.Map(fd.get(), kCallPageBytes, kCallPageBytes));
  fd_ = std::move(fd);
  taken_ = taken;
  return Status::Ok();
}

bool RequestPage::Pending() const {
  return attached() && CallPageOf(page_.data())->seq.load(std::memory_order_seq_cst) != taken_;
}

bool RequestPage::AwaitPending(int socket) {
  if (!attached()) return false;
  int tries = 0;
  bool on_socket = false;
  SpinUntilTrue(std::chrono::steady_clock::now() + std::chrono::microseconds(BusyPollMicros()), [&] {
    if (Pending()) return true;
    // The socket brings every other request; a look at it costs a system call, the page's
    // a load, so the page is looked at more often.
    if (++tries % 8 != 0) return false;
    pollfd p{socket, POLLIN, 0};
    on_socket = poll(&p, 1, 0) != 0;
    return on_socket;
  });
  if (Pending()) return true;
  if (on_socket) return false;
  CallPage* page = CallPageOf(page_.data());
  AnnounceSleep(page);
  if (!Pending()) return false;
  // The request came meanwhile: no frame needed (if the program took `waiting` first, its
  // frame comes anyway and is ignored).
  page->waiting.exchange(0, std::memory_order_seq_cst);
  return true;
}

void RequestPage::StopWaiting() {
  if (attached()) CallPageOf(page_.data())->waiting.exchange(0, std::memory_order_seq_cst);
}

Status RequestPage::Take(Frame* frame) {
  CallPage* page = CallPageOf(page_.data());
  const uint32_t seq = page->seq.load(std::memory_order_seq_cst);
  if (seq != taken_ + 1) {
    return InvalidUsage("the request page says request %u where %u was next", seq, taken_ + 1);
  }
  taken_ = seq;
  // Loaded once each (atomics: no second load after the checks): the program may write the
  // page while we copy.
  const uint32_t type = page->type.load(std::memory_order_relaxed);
  const uint32_t len = page->len.load(std::memory_order_relaxed);
  if (type != shimproto::kGroup) return InvalidUsage("request type %u in the request page (only Group)", type);
  if (len < sizeof(shimproto::GroupRequest) || len > kCallPagePayloadBytes) {
    return InvalidUsage("a Group request of %u bytes in the request page", len);
  }
  frame->header = FrameHeader{shimproto::kMagic, shimproto::kVersion, static_cast<uint16_t>(type), len, 0};
  frame->payload.assign(page->payload, page->payload + len);
  frame->fd.reset();
  shimproto::GroupRequest head;
  memcpy(&head, frame->payload.data(), sizeof(head));
  if ((head.flags & shimproto::kGroupReplyInPage) == 0) {
    return InvalidUsage("a Group in the request page must ask for its reply in the reply page");
  }
  return Status::Ok();
}

}  // namespace conduit
