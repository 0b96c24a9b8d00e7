// The shim's own copies of a rank's sends to itself (libmccs-nccl/self_p2p.h): they pair
// up as the daemon would match them, leave the group, and copy each send into its receive;
// a group whose own sends and receives do not pair up keeps them all for the daemon.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "self_p2p.h"

namespace conduit {
namespace {

constexpr int kMe = 2;

PendingOp P2p(uint8_t kind, int peer, const void* in, void* out, size_t bytes, MemoryKind place = MemoryKind::kHost) {
  PendingOp op;
  op.desc.kind = kind;
  op.desc.peer = peer;
  op.place = place;
  op.region_bytes = bytes;
  if (kind == shimproto::kSend) {
    op.in = in;
    op.in_bytes = bytes;
  } else {
    op.out = out;
    op.out_bytes = bytes;
  }
  return op;
}

std::vector<PendingOp*> Pointers(std::vector<PendingOp>& ops) {
  std::vector<PendingOp*> list;
  for (PendingOp& op : ops) list.push_back(&op);
  return list;
}

TEST(ShimSelfP2pTest, AnAllToAllsOwnBlocksAreCopiedInOrderAndLeaveTheGroup) {
  // Two own blocks (an all-to-all's, twice in one group), in between ops with other peers.
  std::vector<uint8_t> send_a(64, 1), send_b(32, 2), recv_a(64, 0), recv_b(32, 0), other(16, 9);
  std::vector<PendingOp> ops = {
      P2p(shimproto::kRecv, kMe, nullptr, recv_a.data(), 64), P2p(shimproto::kSend, 1, other.data(), nullptr, 16),
      P2p(shimproto::kSend, kMe, send_a.data(), nullptr, 64), P2p(shimproto::kRecv, 1, nullptr, other.data(), 16),
      P2p(shimproto::kSend, kMe, send_b.data(), nullptr, 32), P2p(shimproto::kRecv, kMe, nullptr, recv_b.data(), 32),
  };
  std::vector<PendingOp*> list = Pointers(ops);
  std::vector<SelfCopy> copies = TakeSelfCopies(kMe, &list);
  ASSERT_EQ(copies.size(), 2u);
  ASSERT_EQ(list.size(), 2u);  // the two with rank 1 stay, in their order
  EXPECT_EQ(list[0], &ops[1]);
  EXPECT_EQ(list[1], &ops[3]);
  RunSelfCopies(copies);
  EXPECT_EQ(recv_a, send_a);  // the first send to itself went to the first receive from itself
  EXPECT_EQ(recv_b, send_b);
}

TEST(ShimSelfP2pTest, OwnSendsThatDoNotPairUpStayForTheDaemon) {
  std::vector<uint8_t> a(64, 1), b(64, 0);
  // A send to itself without its receive in the group.
  std::vector<PendingOp> lone = {P2p(shimproto::kSend, kMe, a.data(), nullptr, 64)};
  std::vector<PendingOp*> list = Pointers(lone);
  EXPECT_TRUE(TakeSelfCopies(kMe, &list).empty());
  EXPECT_EQ(list.size(), 1u);
  // A pair of different sizes (the daemon's error: "sent N bytes but posted a receive of M").
  std::vector<PendingOp> sizes = {P2p(shimproto::kSend, kMe, a.data(), nullptr, 64),
                                  P2p(shimproto::kRecv, kMe, nullptr, b.data(), 32)};
  list = Pointers(sizes);
  EXPECT_TRUE(TakeSelfCopies(kMe, &list).empty());
  EXPECT_EQ(list.size(), 2u);
  // Two sends, one receive: none is taken.
  std::vector<PendingOp> counts = {P2p(shimproto::kSend, kMe, a.data(), nullptr, 32),
                                   P2p(shimproto::kSend, kMe, a.data(), nullptr, 32),
                                   P2p(shimproto::kRecv, kMe, nullptr, b.data(), 32)};
  list = Pointers(counts);
  EXPECT_TRUE(TakeSelfCopies(kMe, &list).empty());
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(b, std::vector<uint8_t>(64, 0));
}

TEST(ShimSelfP2pTest, DeviceBuffersAndOtherPeersGoToTheDaemon) {
  std::vector<uint8_t> a(64, 1), b(64, 0);
  std::vector<PendingOp> ops = {P2p(shimproto::kSend, kMe, a.data(), nullptr, 64, MemoryKind::kDevice),
                                P2p(shimproto::kRecv, kMe, nullptr, b.data(), 64, MemoryKind::kDevice),
                                P2p(shimproto::kSend, 0, a.data(), nullptr, 64),
                                P2p(shimproto::kRecv, 0, nullptr, b.data(), 64)};
  std::vector<PendingOp*> list = Pointers(ops);
  EXPECT_TRUE(TakeSelfCopies(kMe, &list).empty());
  EXPECT_EQ(list.size(), 4u);
}

}  // namespace
}  // namespace conduit
