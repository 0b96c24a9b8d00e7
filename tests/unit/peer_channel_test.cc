// PeerChannel (collectives/peer_channel.h), the communicator's p2p channel, between two
// "daemons" in one process over socketpair links: messages and control frames reach the
// other side's handler in order, an abort notice carries its reason, a goodbye ends the
// link quietly, and a bad frame or a lost link is reported as a failure of that link. A
// pause (live upgrade) stops the readers between two frames, leaving what comes next in
// the kernel.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/peer_channel.h"
#include "common/frame.h"
#include "protocol/peer_protocol.h"
#include "transport/local_link.h"

namespace conduit {
namespace {

// Records what a reader hands over.
class Recorder : public PeerChannel::Handler {
 public:
  Status ReserveP2p(int /*src*/, int /*dst*/, uint64_t bytes, uint8_t** into) override {
    if (refuse_messages_.ok()) reserved_ += bytes;
    if (refuse_messages_.ok() && bytes == direct_.size()) *into = direct_.data();
    return refuse_messages_;
  }
  void OnP2pMessage(int src, int dst, std::vector<uint8_t> bytes) override {
    Add("msg " + std::to_string(src) + "->" + std::to_string(dst) + " " + std::string(bytes.begin(), bytes.end()));
  }
  uint8_t* RetargetP2p(int /*src*/, int /*dst*/, uint64_t /*arrived*/) override { return retarget_.empty() ? nullptr : retarget_.data(); }
  void OnP2pFilled(int src, int dst, bool whole) override {
    Add("filled " + std::to_string(src) + "->" + std::to_string(dst) + (whole ? " " : " cut off ") +
        std::string(direct_.begin(), direct_.end()));
  }
  Status OnControl(int host, uint16_t type, const std::vector<uint8_t>& payload) override {
    Add("control " + std::to_string(host) + " " + std::to_string(type) + " " + std::string(payload.begin(), payload.end()));
    return Status::Ok();
  }
  void OnPeerAborted(const Status& why) override { Add("aborted " + why.message()); }
  void OnLinkFailed(int host, const Status& why) override { Add("failed " + std::to_string(host) + " " + why.message()); }

  // What ReserveP2p answers (set before the message comes), and what it granted.
  Status refuse_messages_;
  std::atomic<uint64_t> reserved_{0};
  // A posted receive's buffer: a message of its length is read into it (empty: none).
  std::vector<uint8_t> direct_;
  // A receive's buffer posted while a message is read (RetargetP2p; empty: none).
  std::vector<uint8_t> retarget_;

  // Waits until `n` events arrived (at most `ms`) and returns them.
  std::vector<std::string> Wait(size_t n, int ms = 5000) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  void Add(std::string e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

// Host 0 has rank 0, host 1 has rank 1.
struct Pair {
  Recorder heard0, heard1;
  PeerChannel ch0{&heard0, 2000};
  PeerChannel ch1{&heard1, 2000};
  Link* raw01 = nullptr;  // host 0's end, for writing frames by hand

  Pair() {
    std::unique_ptr<Link> a, b;
    EXPECT_TRUE(NewLocalLinkPair("h1", "h0", &a, &b).ok());
    raw01 = a.get();
    ch0.Init({0, 1}, 0, 2);
    ch1.Init({0, 1}, 1, 2);
    EXPECT_EQ(ch0.Attach(1, std::move(a)), PeerChannel::Attached::kOk);
    EXPECT_EQ(ch1.Attach(0, std::move(b)), PeerChannel::Attached::kOk);
  }
};

TEST(PeerChannelTest, MessagesAndControlArriveInOrder) {
  Pair p;
  const std::string big(5 << 20, 'x');  // more than a socket buffer
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "hello", 5, Deadline::AfterMs(2000)).ok());
  ASSERT_TRUE(p.ch0.SendControl(1, peerproto::kReconfigSeq, {'a', 'b'}, Deadline::AfterMs(2000)).ok());
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, big.data(), big.size(), Deadline::AfterMs(5000)).ok());
  std::vector<std::string> got = p.heard1.Wait(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "msg 0->1 hello");
  EXPECT_EQ(got[1], "control 0 " + std::to_string(peerproto::kReconfigSeq) + " ab");
  EXPECT_EQ(got[2], "msg 0->1 " + big);
  ASSERT_TRUE(p.ch1.SendMessage(0, 1, 0, "back", 4, Deadline::AfterMs(2000)).ok());
  EXPECT_EQ(p.heard0.Wait(1).at(0), "msg 1->0 back");
  std::vector<std::pair<int, std::string>> peers = p.ch0.Peers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].first, 1);
  EXPECT_EQ(p.ch0.Attach(1, nullptr), PeerChannel::Attached::kDuplicate) << "a second link to the same host is refused";
}

TEST(PeerChannelTest, AbortNoticeCarriesTheReasonAndGoodbyeIsQuiet) {
  Pair p;
  p.ch0.TellAborted(RemoteError("rank 0 disagreed"));
  std::vector<std::string> got = p.heard1.Wait(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "aborted rank 0 disagreed");

  Pair q;
  q.ch1.SayGoodbye();
  q.ch1.Close();
  EXPECT_TRUE(q.heard0.Wait(1, 300).empty()) << "a goodbye, then the end of the link, is no failure";
}

TEST(PeerChannelTest, BadFramesAndLostLinksFailTheLink) {
  {
    Pair p;  // a message from a rank that is not on the sending host
    peerproto::P2pData head{1, 1, 3};
    FrameHeader h{peerproto::kMagic, peerproto::kVersion, peerproto::kP2pData, sizeof(head), 0};
    ASSERT_TRUE(p.raw01->Send({{&h, sizeof(h)}, {&head, sizeof(head)}, {"abc", 3}}, Deadline::AfterMs(2000)).ok());
    std::vector<std::string> got = p.heard1.Wait(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].rfind("failed 0 ", 0), 0u) << got[0];
  }
  {
    Pair p;  // a frame of another protocol
    FrameHeader h{0x12345678, peerproto::kVersion, peerproto::kP2pData, 0, 0};
    ASSERT_TRUE(p.raw01->Send({{&h, sizeof(h)}}, Deadline::AfterMs(2000)).ok());
    std::vector<std::string> got = p.heard1.Wait(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].rfind("failed 0 ", 0), 0u) << got[0];
  }
  {
    Pair p;  // the peer goes away without a word
    p.ch0.Close();
    std::vector<std::string> got = p.heard1.Wait(1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].rfind("failed 0 ", 0), 0u) << got[0];
  }
}

// Room for a message is asked for from its header, before its bytes are read; a message
// the communicator has no room for (its mailbox over the cap past the deadline) ends the
// link with that reason, and neither it nor anything after it is read.
TEST(PeerChannelTest, RoomIsReservedBeforeTheBytesAndARefusalFailsTheLink) {
  Pair p;
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "one", 3, Deadline::AfterMs(2000)).ok());
  EXPECT_EQ(p.heard1.Wait(1).at(0), "msg 0->1 one");
  EXPECT_EQ(p.heard1.reserved_.load(), 3u);
  p.heard1.refuse_messages_ = Status(StatusCode::kResourceExhausted, "no room");
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "two", 3, Deadline::AfterMs(2000)).ok());
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "three", 5, Deadline::AfterMs(2000)).ok());
  std::vector<std::string> got = p.heard1.Wait(3, 500);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], "failed 0 no room");
}

// A message whose receive named its buffer is read straight into it and reported as
// filled, and so is the rest of one whose receive is posted while it comes in; one cut off
// by the link's end is reported as such before the link's failure, so the receive waiting
// on that buffer learns it will not be whole.
TEST(PeerChannelTest, MessagesForANamedBufferAreReadIntoItAndACutOffOneIsReported) {
  Pair p;
  p.heard1.direct_.assign(5, '.');
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "hello", 5, Deadline::AfterMs(2000)).ok());
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "other", 5 - 1, Deadline::AfterMs(2000)).ok());
  std::vector<std::string> got = p.heard1.Wait(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "filled 0->1 hello");
  EXPECT_EQ(got[1], "msg 0->1 othe") << "a message of another length is read into memory of the reader's";

  // A message longer than a piece, whose receive is posted after it began: the rest goes
  // into the receive's buffer, with what came before copied there.
  Pair r;
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  r.heard1.retarget_.assign(big.size(), '.');
  ASSERT_TRUE(r.ch0.SendMessage(1, 0, 1, big.data(), big.size(), Deadline::AfterMs(5000)).ok());
  got = r.heard1.Wait(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rfind("filled 0->1 ", 0), 0u) << got[0].substr(0, 40);
  EXPECT_TRUE(std::equal(big.begin(), big.end(), r.heard1.retarget_.begin())) << "the bytes are not all there";

  Pair q;
  q.heard1.direct_.assign(5, '.');
  peerproto::P2pData head{0, 1, 5};
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, peerproto::kP2pData, sizeof(head), 0};
  ASSERT_TRUE(q.raw01->Send({{&h, sizeof(h)}, {&head, sizeof(head)}, {"hel", 3}}, Deadline::AfterMs(2000)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.ch0.Close();
  got = q.heard1.Wait(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "filled 0->1 cut off hel..");
  EXPECT_EQ(got[1].rfind("failed 0 ", 0), 0u) << got[1];
}

TEST(PeerChannelTest, APauseLeavesTheNextFrameInTheKernel) {
  Pair p;
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "one", 3, Deadline::AfterMs(2000)).ok());
  ASSERT_EQ(p.heard1.Wait(1).size(), 1u);
  ASSERT_TRUE(p.ch1.Pause(Deadline::AfterMs(2000)).ok());
  ASSERT_TRUE(p.ch0.SendMessage(1, 0, 1, "two", 3, Deadline::AfterMs(2000)).ok());
  EXPECT_EQ(p.heard1.Wait(2, 300).size(), 1u);  // not read
  // The frame waits whole in the socket, for whichever process reads it next.
  std::vector<UniqueFd> sockets;
  ASSERT_TRUE(p.ch1.DupSockets(&sockets).ok());
  ASSERT_EQ(sockets.size(), 2u);
  ASSERT_TRUE(sockets[0].valid());
  EXPECT_FALSE(sockets[1].valid());  // no link with itself
  uint8_t peek[64];
  const ssize_t waiting = recv(sockets[0].get(), peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT);
  EXPECT_EQ(waiting, static_cast<ssize_t>(sizeof(FrameHeader) + sizeof(peerproto::P2pData) + 3));
  // Called off: the reader goes on from that frame.
  p.ch1.Resume();
  std::vector<std::string> got = p.heard1.Wait(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], "msg 0->1 two");
}

TEST(PeerChannelTest, APauseWaitsForAFrameInProgress) {
  Pair p;
  // Half a frame: the reader is inside it and cannot stop until the rest comes.
  peerproto::P2pData head{0, 1, 4};
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, peerproto::kP2pData, sizeof(head), 0};
  ASSERT_TRUE(p.raw01->Send({{&h, sizeof(h)}, {&head, sizeof(head)}, {"ab", 2}}, Deadline::AfterMs(1000)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Status st = p.ch1.Pause(Deadline::AfterMs(200));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("in the middle of a message"), std::string::npos) << st.message();
  // The channel went on: the rest of the frame completes the message.
  ASSERT_TRUE(p.raw01->Send({{"cd", 2}}, Deadline::AfterMs(1000)).ok());
  std::vector<std::string> got = p.heard1.Wait(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "msg 0->1 abcd");
  EXPECT_TRUE(p.ch1.Pause(Deadline::AfterMs(2000)).ok());
  p.ch1.Resume();
}

}  // namespace
}  // namespace conduit
