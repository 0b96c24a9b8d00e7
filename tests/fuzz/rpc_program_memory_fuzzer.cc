// What a gRPC program writes into the memory it shares with conduitd, and the descriptors it
// sends beside its frames:
//   * mode 0: a release ring as the program leaves it (its index and entries): drained as
//     the daemon drains the to-daemon ring and libmrpc-grpc the to-shim ring
//     (DrainReleases), and pushed to against the consumer index the program wrote
//     (PushRelease);
//   * mode 1: the messages a Call frame names in the program's send segments, as
//     (segment, offset, length) records (ProgramMemory::SendMessage): one segment of 64 KiB
//     and one sparse one larger than the largest message;
//   * mode 2: a byte stream of frames sent in pieces, each piece with 0-4 descriptors
//     attached, read by the daemon's buffered reader (FrameReader with descriptors): it never
//     holds more than its cap of descriptors no frame took, and drops them all when a peer
//     sends more.
// The first byte picks the mode (its value mod 3).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/fd_io.h"
#include "common/frame_stream.h"
#include "common/release_ring.h"
#include "common/shm_segment.h"
#include "fuzz_check.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"
#include "rpc/program_memory.h"

using namespace conduit;
using namespace conduit::rpc;

namespace {

constexpr size_t kHeldFdCap = 64;  // FrameReader's kMaxHeldFds (common/frame_stream.cc)

// Reads a little-endian value at `*at`, or 0 past the end; advances `*at`.
template <typename T>
T Take(const uint8_t* data, size_t size, size_t* at) {
  T v{};
  if (*at + sizeof(T) <= size) memcpy(&v, data + *at, sizeof(T));
  *at += sizeof(T);
  return v;
}

void FuzzRing(const uint8_t* data, size_t size) {
  static rpcproto::FreeEntry entries[rpcproto::kRingEntries];
  size_t at = 0;
  const uint64_t produced = Take<uint64_t>(data, size, &at);
  const uint64_t start = Take<uint64_t>(data, size, &at);
  const size_t left = at < size ? size - at : 0;
  memset(entries, 0, sizeof(entries));
  memcpy(entries, data + (size - left), std::min(left, sizeof(entries)));

  rpcproto::RingIndex head, tail;
  head.value.store(produced);
  tail.value.store(start);
  uint64_t my_tail = start, calls = 0;
  bool same = true;
  const bool drained = rpcproto::DrainReleases(head, tail, entries, &my_tail, [&](const rpcproto::FreeEntry& e) {
    const rpcproto::FreeEntry& slot = entries[(start + calls) % rpcproto::kRingEntries];
    same = same && e.segment == slot.segment && e.reserved == slot.reserved && e.offset == slot.offset;
    ++calls;
  });
  FUZZ_CHECK(drained == (produced - start <= rpcproto::kRingEntries), "drained %d with indices %llu, %llu", drained,
             static_cast<unsigned long long>(produced), static_cast<unsigned long long>(start));
  if (drained) {
    FUZZ_CHECK(calls == produced - start && my_tail == produced && tail.value.load() == produced,
               "%llu entries for indices %llu, %llu", static_cast<unsigned long long>(calls),
               static_cast<unsigned long long>(produced), static_cast<unsigned long long>(start));
    FUZZ_CHECK(same, "an entry handed on is not the ring's");
  } else {
    FUZZ_CHECK(calls == 0 && my_tail == start && tail.value.load() == start, "a refused ring was drained");
  }

  // The producer's side, against the consumer index the other side wrote.
  uint64_t my_head = start;
  const rpcproto::FreeEntry e{7, 0, 4096};
  const bool pushed = rpcproto::PushRelease(head, tail, entries, &my_head, e);
  FUZZ_CHECK(pushed == (start - tail.value.load() < rpcproto::kRingEntries), "push %d", pushed);
  if (pushed) FUZZ_CHECK(my_head == start + 1 && head.value.load() == my_head, "push did not advance");
}

struct SendSegments {
  std::shared_ptr<ProgramMemory> memory;
  uint64_t sizes[2] = {64 << 10, rpcproto::kMaxMessageBytes + (1 << 20)};
};

// Made once: the segments stay attached for every input (a sparse memfd costs nothing).
SendSegments* Segments() {
  static SendSegments* s = [] {
    auto* s = new SendSegments;
    s->memory = std::make_shared<ProgramMemory>([](const rpcproto::FreeEntry&) {}, 1 << 20, uint64_t{16} << 30);
    static ShmSegment control;
    UniqueFd control_fd;
    if (!control.Create("fuzz-control", rpcproto::kControlRegionBytes, &control_fd).ok() ||
        !s->memory->MapControl(control_fd.get()).ok()) {
      abort();
    }
    for (uint32_t i = 0; i < 2; ++i) {
      UniqueFd fd(memfd_create("fuzz-send", MFD_CLOEXEC | MFD_ALLOW_SEALING));
      if (!fd.valid() || ftruncate(fd.get(), static_cast<off_t>(s->sizes[i])) != 0 ||
          fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
          !s->memory->AttachSend(rpcproto::SegmentInfo{i, 0, s->sizes[i]}, fd.get()).ok()) {
        abort();
      }
    }
    return s;
  }();
  return s;
}

void FuzzSends(const uint8_t* data, size_t size) {
  SendSegments* s = Segments();
  const uint8_t* base[2] = {nullptr, nullptr};
  for (size_t at = 0; at + 20 <= size;) {
    const uint32_t segment = Take<uint32_t>(data, size, &at);
    const uint64_t offset = Take<uint64_t>(data, size, &at);
    const uint64_t len = Take<uint64_t>(data, size, &at);
    Message m;
    const bool ok = s->memory->SendMessage(segment, offset, len, &m).ok();
    const bool in = segment < 2 && len <= rpcproto::kMaxMessageBytes && offset <= s->sizes[segment] &&
                    len <= s->sizes[segment] - offset;
    FUZZ_CHECK(ok == in, "message [%llu, +%llu) in segment %u: taken %d", static_cast<unsigned long long>(offset),
               static_cast<unsigned long long>(len), segment, ok);
    if (!ok) continue;
    FUZZ_CHECK(m.size() == len, "a message of %zu bytes for %llu", m.size(), static_cast<unsigned long long>(len));
    // Every message of a segment lies at its offset from the same mapping.
    const uint8_t* at_base = m.data() - offset;
    if (base[segment] == nullptr) base[segment] = at_base;
    FUZZ_CHECK(at_base == base[segment], "a message outside its segment's mapping");
  }
  FUZZ_CHECK(s->memory->sends_in_flight() == 0, "messages released, sends still in flight");
}

void FuzzDescriptors(const uint8_t* data, size_t size) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  // Pieces: a header byte (low 3 bits: descriptors, mod 5; the rest: 1-32 bytes), then
  // its bytes. At most 64 pieces, all written before the reader starts.
  size_t sent_fds = 0;
  for (size_t at = 0, pieces = 0; at < size && pieces < 64 && null_fd.valid(); ++pieces) {
    const uint8_t h = data[at++];
    const int nfds = (h & 7) % 5;
    const size_t len = std::min<size_t>((h >> 3) + 1, size - at);
    if (len == 0) break;
    const int fds[4] = {null_fd.get(), null_fd.get(), null_fd.get(), null_fd.get()};
    FdControl control;
    iovec iov{const_cast<uint8_t*>(data + at), len};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    AttachFds(&msg, &control, fds, nfds);
    if (sendmsg(sv[1], &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(len)) break;
    sent_fds += nfds;
    at += len;
  }
  close(sv[1]);

  FrameReader reader(sv[0], shimproto::kMagic, shimproto::kVersion, 1 << 16, /*accept_fds=*/true);
  std::vector<uint8_t> payload;
  for (int frames = 0; frames < 64; ++frames) {
    FrameHeader h;
    Status st = reader.NextHeader(&h, Deadline::AfterMs(1000));
    if (st.ok() && !reader.closed()) {
      payload.resize(h.length);
      st = reader.Read(payload.data(), payload.size(), Deadline::AfterMs(1000));
    }
    std::vector<UniqueFd> held;
    FUZZ_CHECK(reader.DupFds(&held).ok(), "the held descriptors cannot be duplicated");
    FUZZ_CHECK(held.size() <= kHeldFdCap && held.size() <= sent_fds, "%zu descriptors held of %zu sent", held.size(),
               sent_fds);
    if (!st.ok() && st.message().find("descriptors sent without frames") != std::string::npos) {
      FUZZ_CHECK(held.empty() && sent_fds > kHeldFdCap, "refused with %zu held, %zu sent", held.size(), sent_fds);
    }
    if (!st.ok() || reader.closed()) break;
  }
  close(sv[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      FuzzRing(data + 1, size - 1);
      break;
    case 1:
      FuzzSends(data + 1, size - 1);
      break;
    default:
      FuzzDescriptors(data + 1, size - 1);
      break;
  }
  return 0;
}
