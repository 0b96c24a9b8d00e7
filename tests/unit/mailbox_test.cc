// Mailbox (daemon/collectives/mailbox.h): a local send points into its program's segment,
// which the program may unmap as soon as the send returns. These tests unmap the sender's
// buffer the moment WaitSent returns, so a receive that read it afterwards would crash
// the test (and the daemon): a failed or timed-out send leaves nothing behind, a failed
// mailbox delivers nothing, and a copy under way is waited out.
#include "collectives/mailbox.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

namespace conduit {
namespace {

// A buffer of its own pages, so that unmapping it makes any later read fault.
class Pages {
 public:
  explicit Pages(size_t size, uint8_t fill) : size_(size) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    data_ = static_cast<uint8_t*>(p);
    memset(data_, fill, size_);
  }
  ~Pages() { Unmap(); }
  void Unmap() {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = nullptr;
  }
  const uint8_t* data() const { return data_; }

 private:
  size_t size_;
  uint8_t* data_ = nullptr;
};

// What a point-to-point reader does with each message: room first, then the bytes, into
// the receive's buffer when the mailbox names one.
Status Arrive(Mailbox& box, int src, int dst, std::vector<uint8_t> bytes, Deadline deadline) {
  uint8_t* into = nullptr;
  CONDUIT_RETURN_IF_ERROR(box.ReserveRemote(src, dst, bytes.size(), deadline, &into));
  if (into != nullptr) {
    memcpy(into, bytes.data(), bytes.size());
    box.FilledRemote(src, dst, true);
  } else {
    box.PostRemote(src, dst, std::move(bytes));
  }
  return Status::Ok();
}

// Room for a message whose bytes never come (the reservation alone).
Status Reserve(Mailbox& box, int src, int dst, size_t len, Deadline deadline) {
  uint8_t* into = nullptr;
  return box.ReserveRemote(src, dst, len, deadline, &into);
}

TEST(Mailbox, ASendThatTimesOutIsWithdrawnAndTheNextOneIsDeliveredInstead) {
  Mailbox box;
  Pages first(4096, 0xAA);
  auto ticket = std::make_shared<SendTicket>();
  box.PostLocal(0, 1, first.data(), 4096, ticket);
  Status st = box.WaitSent(ticket, Deadline::AfterMs(20));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("timed out"), std::string::npos) << st.message();
  first.Unmap();  // the program reuses its buffer once its send has returned

  Pages second(4096, 0x55);
  auto next = std::make_shared<SendTicket>();
  box.PostLocal(0, 1, second.data(), 4096, next);
  std::vector<uint8_t> out(4096, 0);
  ASSERT_TRUE(box.Take(0, 1, out.data(), out.size(), Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(out[0], 0x55);
  EXPECT_EQ(out[4095], 0x55);
  EXPECT_TRUE(box.WaitSent(next, Deadline::AfterMs(1000)).ok());
}

TEST(Mailbox, AFailedMailboxDropsLocalSendsAndDeliversNothing) {
  Mailbox box;
  Pages sent(4096, 0x11);
  auto ticket = std::make_shared<SendTicket>();
  box.PostLocal(0, 1, sent.data(), 4096, ticket);
  ASSERT_TRUE(Arrive(box, 2, 1, std::vector<uint8_t>(16, 0x22), Deadline::AfterMs(1000)).ok());
  box.Fail(RemoteError("rank 3 exited"));
  Status st = box.WaitSent(ticket, Deadline::AfterMs(1000));
  EXPECT_EQ(st.message(), "rank 3 exited");
  sent.Unmap();
  std::vector<uint8_t> out(4096, 0);
  EXPECT_EQ(box.Take(0, 1, out.data(), out.size(), Deadline::AfterMs(1000), nullptr).message(), "rank 3 exited");
  EXPECT_EQ(box.Take(2, 1, out.data(), 16, Deadline::AfterMs(1000), nullptr).message(), "rank 3 exited");
  EXPECT_EQ(out[0], 0);
  // A send posted after the failure hears it at once.
  auto late = std::make_shared<SendTicket>();
  box.PostLocal(0, 1, out.data(), 16, late);
  EXPECT_EQ(box.WaitSent(late, Deadline::AfterMs(1000)).message(), "rank 3 exited");
}

TEST(Mailbox, ALengthMismatchFailsBothSidesAndLeavesNothingQueued) {
  Mailbox box;
  std::vector<uint8_t> in(64, 7), out(32, 0);
  auto ticket = std::make_shared<SendTicket>();
  box.PostLocal(0, 1, in.data(), in.size(), ticket);
  Status recv = box.Take(0, 1, out.data(), out.size(), Deadline::AfterMs(1000), nullptr);
  EXPECT_EQ(recv.code(), ncclInvalidUsage) << recv.message();
  EXPECT_EQ(box.WaitSent(ticket, Deadline::AfterMs(1000)).code(), ncclInvalidUsage);
  EXPECT_FALSE(box.Take(0, 1, out.data(), out.size(), Deadline::AfterMs(10), nullptr).ok()) << "nothing is left queued";
}

// The sender gives up (deadline 0-1 ms) while a receiver may be copying: whichever wins,
// the sender's pages are unmapped as soon as WaitSent returns, and the two sides agree on
// whether the message went through.
TEST(Mailbox, ASenderGivingUpWaitsOutACopyUnderWay) {
  constexpr size_t kBytes = 1 << 20;
  int delivered = 0, withdrawn = 0;
  for (int round = 0; round < 200; ++round) {
    Mailbox box;
    Pages sent(kBytes, static_cast<uint8_t>(round));
    std::vector<uint8_t> out(kBytes, 0);
    auto ticket = std::make_shared<SendTicket>();
    box.PostLocal(0, 1, sent.data(), kBytes, ticket);
    Status received;
    // The receiver comes 0-750 us late, so both outcomes happen.
    std::thread receiver([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(250 * (round % 4)));
      received = box.Take(0, 1, out.data(), kBytes, Deadline::AfterMs(1), nullptr);
    });
    Status st = box.WaitSent(ticket, Deadline::AfterMs(round % 3 == 0 ? 0 : 1));
    sent.Unmap();
    receiver.join();
    EXPECT_EQ(st.ok(), received.ok()) << "round " << round << ": sender " << st.message() << ", receiver "
                                      << received.message();
    if (st.ok()) {
      ++delivered;
      EXPECT_EQ(out[kBytes - 1], static_cast<uint8_t>(round));
    } else {
      ++withdrawn;
    }
  }
  printf("%d delivered, %d withdrawn\n", delivered, withdrawn);
}

// A local send of device memory (DeviceSource) is handed to the receive that can take it:
// the sender waits past its own deadline while the taker copies, and hears the taker's
// outcome; the mapping the message holds lives as long as the message.
TEST(Mailbox, ATakenDeviceSendEndsWithItsTakersOutcome) {
  for (bool copied : {true, false}) {
    Mailbox box;
    auto mapping = std::make_shared<int>(7);
    auto source = std::make_shared<DeviceSource>();
    source->ptr = 0x1000;
    source->device = 0;
    source->keep.push_back(mapping);
    auto ticket = std::make_shared<SendTicket>();
    box.PostLocalDevice(0, 1, source, 256, ticket);
    source.reset();
    TakenMessage taken;
    ASSERT_TRUE(box.Take(0, 1, nullptr, 256, Deadline::AfterMs(1000), &taken).ok());
    ASSERT_TRUE(taken.device);
    EXPECT_EQ(taken.device->ptr, 0x1000u);
    EXPECT_EQ(taken.device->keep.size(), 1u);
    Status sent;
    std::thread sender([&] { sent = box.WaitSent(ticket, Deadline::AfterMs(1)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the taker's copy, past the sender's deadline
    box.Complete(taken.ticket, copied ? Status::Ok() : RemoteError("the copy failed"));
    sender.join();
    EXPECT_EQ(sent.ok(), copied) << sent.message();
    taken = TakenMessage{};
    EXPECT_EQ(mapping.use_count(), 1) << "the message let go of the sender's mapping";
  }
}

// A receive that cannot take device memory (Take with no TakenMessage) fails both sides
// with a clear error, and so does a length mismatch; an untaken device send times out and
// is withdrawn.
TEST(Mailbox, DeviceSendsReachOnlyReceivesThatTakeThem) {
  Mailbox box;
  auto source = std::make_shared<DeviceSource>();
  auto ticket = std::make_shared<SendTicket>();
  box.PostLocalDevice(0, 1, source, 64, ticket);
  std::vector<uint8_t> out(64);
  Status st = box.Take(0, 1, out.data(), out.size(), Deadline::AfterMs(1000), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("device memory"), std::string::npos) << st.message();
  EXPECT_FALSE(box.WaitSent(ticket, Deadline::AfterMs(1000)).ok());

  auto mismatch = std::make_shared<SendTicket>();
  box.PostLocalDevice(0, 1, source, 64, mismatch);
  TakenMessage taken;
  st = box.Take(0, 1, out.data(), 32, Deadline::AfterMs(1000), &taken);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("sent 64 bytes"), std::string::npos) << st.message();
  EXPECT_FALSE(taken.device);
  EXPECT_FALSE(box.WaitSent(mismatch, Deadline::AfterMs(1000)).ok());

  auto unread = std::make_shared<SendTicket>();
  box.PostLocalDevice(0, 1, source, 64, unread);
  st = box.WaitSent(unread, Deadline::AfterMs(10));
  EXPECT_NE(st.message().find("timed out"), std::string::npos) << st.message();
  EXPECT_EQ(source.use_count(), 1) << "the withdrawn message still holds the source";
  EXPECT_FALSE(box.Take(0, 1, out.data(), 64, Deadline::AfterMs(10), &taken).ok()) << "nothing left to take";
}

// Messages from other daemons wait under a cap: over it a reservation waits until a
// receive frees room (so the link it reads from waits too), fails with a clear error when
// none does in time, and ends when the mailbox fails.
TEST(Mailbox, MessagesFromOtherDaemonsWaitUnderACap) {
  constexpr uint64_t kEntry = Mailbox::kRemoteEntryBytes;
  Mailbox box(3000 + 2 * kEntry);
  ASSERT_TRUE(Arrive(box, 5, 0, std::vector<uint8_t>(1000, 1), Deadline::AfterMs(1000)).ok());
  ASSERT_TRUE(Arrive(box, 5, 0, std::vector<uint8_t>(2000, 2), Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(box.remote_bytes(), 3000 + 2 * kEntry);

  // Full: an empty message waits too (its entry counts), and fails when no room comes.
  Status st = Reserve(box, 5, 0, 0, Deadline::AfterMs(50));
  EXPECT_TRUE(IsResourceExhausted(st)) << st.message();
  EXPECT_NE(st.message().find("rank 5 sent rank 0 0 bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--p2p-queue-bytes"), std::string::npos) << st.message();
  EXPECT_EQ(box.remote_bytes(), 3000 + 2 * kEntry) << "the refused message is not counted";

  // A receive makes room for a waiting message.
  Status arrived;
  std::thread reader([&] { arrived = Arrive(box, 5, 0, std::vector<uint8_t>(500, 3), Deadline::AfterMs(5000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<uint8_t> out(2000);
  ASSERT_TRUE(box.Take(5, 0, out.data(), 1000, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(out[0], 1);
  reader.join();
  EXPECT_TRUE(arrived.ok()) << arrived.message();
  EXPECT_EQ(box.remote_bytes(), 2500 + 2 * kEntry);
  EXPECT_EQ(box.remote_peak_bytes(), 3000 + 2 * kEntry);
  ASSERT_TRUE(box.Take(5, 0, out.data(), 2000, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(out[1999], 2);
  // A receive of the wrong length drops the message, and frees its room all the same.
  EXPECT_FALSE(box.Take(5, 0, out.data(), 7, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(box.remote_bytes(), 0u);

  // A failure ends a wait at once, with the failure's reason.
  std::thread blocked([&] { arrived = Reserve(box, 5, 0, 1 << 20, Deadline::AfterMs(10000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto failed_at = std::chrono::steady_clock::now();
  box.Fail(RemoteError("rank 2 exited"));
  blocked.join();
  EXPECT_EQ(arrived.message(), "rank 2 exited");
  EXPECT_LT(std::chrono::steady_clock::now() - failed_at, std::chrono::seconds(5));
}

// A message larger than the cap comes in only once a receive of its length is posted for
// it (Expect), in the order the receives were posted; then it comes in whatever else
// waits. Take consumes the expectation it matches, ForgetExpected drops the rest, and a
// live upgrade's messages (RestoreArrived) come in whatever the cap.
TEST(Mailbox, PostedReceivesLetTheirMessagesPastTheCap) {
  constexpr uint64_t kEntry = Mailbox::kRemoteEntryBytes;
  Mailbox box(1000);
  EXPECT_FALSE(Reserve(box, 5, 0, 10000, Deadline::AfterMs(20)).ok()) << "nothing posted: over the cap";
  box.Expect(5, 0, 10000);
  box.Expect(5, 0, 20000);
  box.Expect(6, 0, 30000);
  EXPECT_FALSE(Reserve(box, 5, 0, 20000, Deadline::AfterMs(20)).ok()) << "not the next posted length";
  EXPECT_FALSE(Reserve(box, 5, 1, 10000, Deadline::AfterMs(20)).ok()) << "posted for another rank";
  ASSERT_TRUE(Arrive(box, 5, 0, std::vector<uint8_t>(10000, 1), Deadline::AfterMs(1000)).ok());
  ASSERT_TRUE(Arrive(box, 5, 0, std::vector<uint8_t>(20000, 2), Deadline::AfterMs(1000)).ok());
  EXPECT_FALSE(Reserve(box, 5, 0, 20000, Deadline::AfterMs(20)).ok()) << "both posted receives are matched";
  ASSERT_TRUE(Arrive(box, 6, 0, std::vector<uint8_t>(30000, 3), Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(box.remote_bytes(), 60000 + 3 * kEntry);

  // A reader waiting for its receive goes on once it is posted.
  Status arrived;
  std::thread reader([&] { arrived = Arrive(box, 7, 0, std::vector<uint8_t>(40000, 4), Deadline::AfterMs(5000)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  box.Expect(7, 0, 40000);
  reader.join();
  EXPECT_TRUE(arrived.ok()) << arrived.message();

  std::vector<uint8_t> out(40000);
  ASSERT_TRUE(box.Take(5, 0, out.data(), 10000, Deadline::AfterMs(1000), nullptr).ok());
  ASSERT_TRUE(box.Take(5, 0, out.data(), 20000, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(out[19999], 2);
  box.Expect(5, 0, 50000);
  box.ForgetExpected(0);  // the group ended without this receive
  EXPECT_FALSE(Reserve(box, 5, 0, 50000, Deadline::AfterMs(20)).ok());
  ASSERT_TRUE(box.Take(6, 0, out.data(), 30000, Deadline::AfterMs(1000), nullptr).ok());
  ASSERT_TRUE(box.Take(7, 0, out.data(), 40000, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(out[39999], 4);
  EXPECT_EQ(box.remote_bytes(), 0u);

  box.RestoreArrived(ArrivedMessage{6, 0, std::vector<uint8_t>(5000, 6)});
  EXPECT_EQ(box.remote_bytes(), 5000 + kEntry);
  ASSERT_TRUE(box.Take(6, 0, out.data(), 5000, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(out[4999], 6);
}

// A message whose posted receive named its buffer (Expect with `into`) is read straight
// into that buffer, in the receives' order, and costs the cap its entry only; the receive
// waits until it is whole and copies nothing. A fill cut off by its link fails the
// receive. The group's end (ForgetExpected) waits for a fill under way, since the buffer
// goes with the group, and moves a filled message nobody took into the daemon's memory,
// where the next receive gets it. A buffer may also be named after its receive was posted,
// and a receive posted while its message comes in takes over the rest of it.
TEST(Mailbox, MessagesForPostedBuffersAreReadStraightIntoThem) {
  constexpr uint64_t kEntry = Mailbox::kRemoteEntryBytes;
  Mailbox box(1000);
  ASSERT_TRUE(Arrive(box, 5, 0, std::vector<uint8_t>(100, 1), Deadline::AfterMs(1000)).ok());  // before the group
  std::vector<uint8_t> first(100), second(20000), third(300);
  box.Expect(5, 0, 100, first.data());
  box.Expect(5, 0, 20000, second.data());
  box.Expect(5, 0, 300, third.data());
  uint8_t* into = nullptr;
  ASSERT_TRUE(box.ReserveRemote(5, 0, 20000, Deadline::AfterMs(1000), &into).ok());
  ASSERT_EQ(into, second.data()) << "the second message is for the second receive";
  EXPECT_EQ(box.remote_bytes(), 100 + 2 * kEntry) << "bytes in a receive's buffer are not the daemon's";
  memset(into, 2, 10000);  // half of it came
  ASSERT_TRUE(box.Take(5, 0, first.data(), 100, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(first[99], 1);
  std::thread rest([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    memset(into + 10000, 2, 10000);
    box.FilledRemote(5, 0, true);
  });
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(box.Take(5, 0, second.data(), 20000, Deadline::AfterMs(2000), nullptr).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(90)) << "taken before it was whole";
  EXPECT_EQ(second[19999], 2);
  rest.join();

  // The third comes into its buffer, the group ends before taking it (say an earlier
  // receive failed): the group's end waits for the fill, then keeps the message.
  ASSERT_TRUE(box.ReserveRemote(5, 0, 300, Deadline::AfterMs(1000), &into).ok());
  ASSERT_EQ(into, third.data());
  std::atomic<bool> filled{false};
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    memset(into, 3, 300);
    filled = true;
    box.FilledRemote(5, 0, true);
  });
  box.ForgetExpected(0);
  EXPECT_TRUE(filled.load()) << "the group ended while its buffer was still being written";
  reader.join();
  EXPECT_EQ(box.remote_bytes(), 300 + kEntry) << "kept in the daemon's memory now";
  memset(third.data(), 0, third.size());  // the program reuses its buffer
  std::vector<uint8_t> later(300);
  ASSERT_TRUE(box.Take(5, 0, later.data(), 300, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(later[0], 3);
  EXPECT_EQ(later[299], 3);
  EXPECT_EQ(box.remote_bytes(), 0u);

  // A fill cut off by its link fails its receive.
  box.Expect(6, 0, 400, later.data());
  ASSERT_TRUE(box.ReserveRemote(6, 0, 300, Deadline::AfterMs(1000), &into).ok());  // not the posted length
  EXPECT_EQ(into, nullptr);
  box.PostRemote(6, 0, std::vector<uint8_t>(300, 4));
  EXPECT_FALSE(box.Take(6, 0, later.data(), 400, Deadline::AfterMs(1000), nullptr).ok());
  box.ForgetExpected(0);
  box.Expect(6, 0, 400, later.data());
  ASSERT_TRUE(box.ReserveRemote(6, 0, 400, Deadline::AfterMs(1000), &into).ok());
  ASSERT_EQ(into, later.data());
  box.FilledRemote(6, 0, false);
  Status st = box.Take(6, 0, later.data(), 400, Deadline::AfterMs(1000), nullptr);
  EXPECT_NE(st.message().find("failed while its message to rank 0 came in"), std::string::npos) << st.message();
  box.ForgetExpected(0);
  EXPECT_EQ(box.remote_bytes(), 0u);

  // A buffer named after its receive was posted (a device receive's staging).
  std::vector<uint8_t> staged(64);
  box.Expect(7, 0, 64);
  box.Expect(7, 0, 64);
  box.NameReceiveBuffer(7, 0, 1, staged.data());
  ASSERT_TRUE(box.ReserveRemote(7, 0, 64, Deadline::AfterMs(1000), &into).ok());
  EXPECT_EQ(into, nullptr) << "the first receive named no buffer";
  box.PostRemote(7, 0, std::vector<uint8_t>(64, 7));
  ASSERT_TRUE(box.ReserveRemote(7, 0, 64, Deadline::AfterMs(1000), &into).ok());
  EXPECT_EQ(into, staged.data());
  memset(into, 8, 64);
  box.FilledRemote(7, 0, true);
  ASSERT_TRUE(box.Take(7, 0, later.data(), 64, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(later[0], 7);
  ASSERT_TRUE(box.Take(7, 0, staged.data(), 64, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(staged[63], 8);
  box.ForgetExpected(0);

  // A receive posted while its message is read into the reader's memory takes over the
  // rest (the reader copies what came before); the message then costs its entry only.
  std::vector<uint8_t> late(900);
  ASSERT_TRUE(box.ReserveRemote(8, 0, 900, Deadline::AfterMs(900), &into).ok());
  EXPECT_EQ(into, nullptr);
  EXPECT_EQ(box.RetargetRemote(8, 0), nullptr) << "no receive posted yet";
  EXPECT_EQ(box.remote_bytes(), 900 + kEntry);
  box.Expect(8, 0, 900, late.data());
  uint8_t* retarget = box.RetargetRemote(8, 0);
  ASSERT_EQ(retarget, late.data());
  EXPECT_EQ(box.remote_bytes(), kEntry);
  memset(retarget, 9, 900);
  box.FilledRemote(8, 0, true);
  ASSERT_TRUE(box.Take(8, 0, late.data(), 900, Deadline::AfterMs(900), nullptr).ok());
  EXPECT_EQ(late[899], 9);
  box.ForgetExpected(0);
  EXPECT_EQ(box.remote_bytes(), 0u);
  // One cut off while read into the reader's memory fails its receive.
  ASSERT_TRUE(box.ReserveRemote(8, 0, 10, Deadline::AfterMs(1000), &into).ok());
  box.FilledRemote(8, 0, false);
  EXPECT_FALSE(box.Take(8, 0, late.data(), 10, Deadline::AfterMs(1000), nullptr).ok());
  EXPECT_EQ(box.remote_bytes(), 0u);
}

}  // namespace
}  // namespace conduit
