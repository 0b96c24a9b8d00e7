// Peers (daemon/objects/peers.h) between two instances in this process over loopback TCP:
// what a Cork holds back, and that it goes out whole and in order when the Cork ends.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "objects/peers.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit::objects {
namespace {

constexpr uint16_t kNote = 0x7f01;       // one-way, recorded by the receiver
constexpr uint16_t kEcho = 0x7f03;       // answered with kEchoReply and the same bytes
constexpr uint16_t kEchoReply = 0x7f04;

Bytes B(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string S(const Bytes& b) { return std::string(b.begin(), b.end()); }

// A sender (which connects) and a receiver (which only serves), both leaked on purpose:
// Peers' threads run for the life of the process, as in the daemon.
struct Pair {
  PeerSecurity* sender_security;
  PeerSecurity* receiver_security;
  Peers* sender;
  Peers* receiver;
  std::string receiver_addr;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> received;  // bodies of kNote and kEcho, in arrival order

  Pair() {
    UniqueFd listener;
    SockAddr bound;
    Status st = TcpListen("127.0.0.1:0", &listener, &bound);
    EXPECT_TRUE(st.ok()) << st.message();
    receiver_addr = FormatSockAddr(bound);
    const std::string sender_addr = "127.0.0.1:1";  // never dialled: the receiver is not started
    // Both hold one cluster key; the sender seals (so the Cork's writes go through records).
    ClusterKey key;
    EXPECT_TRUE(EphemeralClusterKey(&key).ok());
    for (auto [self, out] : {std::pair{sender_addr, &sender_security}, std::pair{receiver_addr, &receiver_security}}) {
      PeerSecurityOptions o;
      o.mode = PeerMode::kClusterKey;
      o.key = key;
      o.self = self;
      o.seal = true;
      std::unique_ptr<PeerSecurity> made;
      EXPECT_TRUE(PeerSecurity::Create(o, &made).ok());
      *out = made.release();
    }
    sender = new Peers(sender_addr, {sender_addr, receiver_addr}, sender_security);
    receiver = new Peers(receiver_addr, {sender_addr, receiver_addr}, receiver_security);
    auto record = [this](const Bytes& body) {
      std::lock_guard<std::mutex> lock(mu);
      received.push_back(S(body));
      cv.notify_all();
    };
    receiver->Handle(kNote, [record](const std::string&, const Bytes& body, const ReplyFn&) { record(body); });
    receiver->Handle(kEcho, [record](const std::string&, const Bytes& body, const ReplyFn& reply) {
      record(body);
      reply(kEchoReply, body);
    });
    std::thread([this, l = listener.release()] {
      UniqueFd fd(accept(l, nullptr, nullptr));
      close(l);
      Conn conn;
      PeerIdentity who;
      Status accepted = receiver_security->Accept(std::move(fd), "sender", &conn, &who);
      EXPECT_TRUE(accepted.ok()) << accepted.message();
      EXPECT_TRUE(conn.sealed());
      EXPECT_EQ(who.daemon, "127.0.0.1:1");
      receiver->ServeIncoming(std::move(conn), who);
    }).detach();
    sender->Start();
    for (int i = 0; i < 500 && !sender->IsLive(receiver_addr); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(sender->IsLive(receiver_addr));
  }

  // Waits (bounded) until `n` messages have arrived; returns them.
  std::vector<std::string> WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return received.size() >= n; });
    return received;
  }
  size_t Count() {
    std::lock_guard<std::mutex> lock(mu);
    return received.size();
  }
};

TEST(PeersCork, HoldsMessagesUntilItEndsThenSendsThemInOrder) {
  static Pair* p = new Pair();
  Peers::Outstanding call;
  {
    Peers::Cork cork(p->sender);
    p->sender->Send(p->receiver_addr, kNote, B("one"));
    {
      Peers::Cork inner(p->sender);  // adds to the outer one
      p->sender->Send(p->receiver_addr, kNote, B("two"));
    }
    call = p->sender->Begin(p->receiver_addr, kEcho, B("three"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(p->Count(), 0u) << "a corked message went out early";
  }
  EXPECT_EQ(p->WaitFor(3), (std::vector<std::string>{"one", "two", "three"}));
  Bytes reply;
  Status st = p->sender->Await(call, kEchoReply, &reply, Deadline::AfterMs(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(S(reply), "three");

  // Without a Cork (and from another thread than a corked one) a message goes at once.
  Peers::Cork elsewhere(p->sender);
  std::thread([&] { p->sender->Send(p->receiver_addr, kNote, B("four")); }).join();
  EXPECT_EQ(p->WaitFor(4).back(), "four");
}

}  // namespace
}  // namespace conduit::objects
