// Peers (daemon/objects/peers.h) between two instances in this process over loopback TCP:
// what a Cork holds back, and that it goes out whole and in order when the Cork ends.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "objects/directory.h"
#include "objects/messages.h"
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

  // `before_serving` runs on the receiver before the sender can reach it (to register more
  // handlers).
  explicit Pair(const std::function<void(Peers* receiver)>& before_serving = nullptr) {
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
    if (before_serving) before_serving(receiver);
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
  ObjStatus st = p->sender->Await(call, kEchoReply, &reply, Deadline::AfterMs(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(S(reply), "three");

  // Without a Cork (and from another thread than a corked one) a message goes at once.
  Peers::Cork elsewhere(p->sender);
  std::thread([&] { p->sender->Send(p->receiver_addr, kNote, B("four")); }).join();
  EXPECT_EQ(p->WaitFor(4).back(), "four");
}

// A holder whose copy of a deleted object comes back (a new process that adopted it before
// the drop reached the process it replaced, or a holder the drop never reached) and
// registers it again is told the object is deleted, so the copy goes instead of the
// object coming back. A new Put of the id is not hindered.
TEST(DirectoryTombstone, ACopyRegisteredAgainAfterItsDeleteIsRefused) {
  static DirectoryShard* shard = nullptr;
  static Pair* p = new Pair([](Peers* receiver) {
    shard = new DirectoryShard(receiver);
    shard->Register();
  });
  const std::string holder = "127.0.0.1:1";  // the sender: the shard's drop to it goes nowhere
  std::string id;
  for (int i = 0; id.empty() && i < 1000; ++i) {
    if (p->receiver->Owner("gone-" + std::to_string(i)) == p->receiver_addr) id = "gone-" + std::to_string(i);
  }
  ASSERT_FALSE(id.empty()) << "no id maps to the receiver's shard";
  auto call = [&](uint16_t type, const Bytes& body, uint16_t reply_type) {
    Bytes reply;
    ObjStatus st = p->sender->Await(p->sender->Begin(p->receiver_addr, type, body), reply_type, &reply,
                                    Deadline::AfterMs(10000));
    objproto::Status ws{};
    if (st.ok()) st = Decode(reply, &ws) ? FromWire(ws) : Err(objproto::kInternal, "short reply");
    return st;
  };
  auto publish = [&](uint32_t flags) {
    objproto::Publish m{};
    m.id = IdToWire(id);
    m.where = AddrToWire(holder);
    m.size = 1 << 20;
    m.flags = flags;
    m.owner = objproto::Owner{1000, 1000, objproto::kAccessOwner, 0};
    return call(objproto::kDirPublish, Encode(m), objproto::kDirPublishReply);
  };
  auto erase = [&] {
    objproto::DeleteRequest d{};
    d.id = IdToWire(id);
    d.uid = 1000;
    return call(objproto::kDirDelete, Encode(d), objproto::kDirDeleteReply);
  };
  const uint32_t put = objproto::kPubCreate | objproto::kPubComplete | objproto::kPubOrigin;
  const uint32_t again = objproto::kPubRepublish | objproto::kPubComplete | objproto::kPubOrigin;

  ASSERT_TRUE(publish(put).ok());
  ASSERT_TRUE(publish(again).ok()) << "a copy the directory knows may be registered again";
  ASSERT_TRUE(erase().ok());
  ObjStatus st = publish(again);
  EXPECT_EQ(st.code(), objproto::kNotFound) << st.message();
  EXPECT_NE(st.message().find("was deleted"), std::string::npos) << st.message();
  // A new object of the same id: created, and its copy registers again as any copy does.
  ASSERT_TRUE(publish(put).ok());
  st = publish(again);
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace conduit::objects
