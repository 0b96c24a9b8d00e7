// Peers (daemon/objects/peers.h) between two instances in this process over loopback TCP:
// what a Cork holds back, and that it goes out whole and in order when the Cork ends; and a
// DirectoryShard behind the receiver, which takes a daemon's word only for that daemon.
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
#include "objects/obj_status.h"
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

  // `serve_also` registers more handlers on the receiver before it serves.
  explicit Pair(const std::function<void(Peers*)>& serve_also = nullptr) {
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
    if (serve_also) serve_also(receiver);
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

// The sender is authenticated as 127.0.0.1:1; whatever daemon its messages name, the
// directory acts for that one only.
TEST(DirectoryShard, TakesADaemonsWordOnlyForItsOwnCopies) {
  static DirectoryShard* shard = nullptr;
  static Pair* p = new Pair([](Peers* receiver) {
    shard = new DirectoryShard(receiver);  // leaked, like the Peers it serves on
    shard->Register();
  });
  const std::string sender_addr = p->sender->self();
  std::vector<std::string> ids;  // ids whose shard is the receiver's
  for (int i = 0; ids.size() < 3; ++i) {
    std::string id = "dir-" + std::to_string(i);
    if (p->sender->Owner(id) == p->receiver_addr) ids.push_back(id);
  }
  auto publish = [&](const std::string& id, const std::string& where) {
    objproto::Publish pub{};
    pub.id = IdToWire(id);
    pub.size = 100;
    pub.flags = objproto::kPubComplete | objproto::kPubOrigin | objproto::kPubCreate;
    pub.where = AddrToWire(where);
    return Encode(pub);
  };
  auto call = [&](Peers* from, uint16_t type, Bytes body, uint16_t reply_type) {
    Bytes reply;
    Status st = from->Call(p->receiver_addr, type, std::move(body), reply_type, &reply, Deadline::AfterMs(10000));
    EXPECT_TRUE(st.ok()) << st.message();
    return reply;
  };
  auto published = [&](Peers* from, const std::string& id, const std::string& where) {
    objproto::Status ws{};
    EXPECT_TRUE(Decode(call(from, objproto::kDirPublish, publish(id, where), objproto::kDirPublishReply), &ws));
    return ws;
  };
  auto copies_listed = [&](const std::string& id) {  // asked by the sender, after what it sent before
    objproto::CountReply r{};
    EXPECT_TRUE(Decode(call(p->sender, objproto::kDirCount, Encode(IdToWire(id)), objproto::kDirCountReply), &r));
    return r.complete + r.partial;
  };

  // The receiver's own copy of ids[0], published by itself (from = itself).
  ASSERT_EQ(published(p->receiver, ids[0], p->receiver_addr).code, objproto::kOk);
  ASSERT_EQ(copies_listed(ids[0]), 1u);

  // The sender withdraws the receiver's copy, and tells the directory the receiver is done
  // with a transfer: neither is taken (before, the copy was gone and the object lost).
  objproto::Location l{};
  l.id = IdToWire(ids[0]);
  l.where = AddrToWire(p->receiver_addr);
  p->sender->Send(p->receiver_addr, objproto::kDirUnpublish, Encode(l));
  objproto::Release rel{};
  rel.id = IdToWire(ids[0]);
  rel.sender = AddrToWire(p->receiver_addr);
  rel.receiver = AddrToWire(p->receiver_addr);
  p->sender->Send(p->receiver_addr, objproto::kDirRelease, Encode(rel));
  EXPECT_EQ(copies_listed(ids[0]), 1u);

  // The sender publishes a copy on the receiver: refused with a reason, nothing listed.
  objproto::Status forged = published(p->sender, ids[1], p->receiver_addr);
  EXPECT_EQ(forged.code, objproto::kInvalid);
  EXPECT_NE(std::string(forged.message).find("may only speak for its own copies"), std::string::npos) << forged.message;
  EXPECT_EQ(copies_listed(ids[1]), 0u);

  // It asks for a copy on behalf of the receiver: refused.
  objproto::Acquire a{};
  a.id = IdToWire(ids[0]);
  a.requester = AddrToWire(p->receiver_addr);
  a.timeout_ms = 1000;
  objproto::AcquireReply ar{};
  ASSERT_TRUE(Decode(call(p->sender, objproto::kDirAcquire, Encode(a), objproto::kDirAcquireReply), &ar));
  EXPECT_EQ(ar.status.code, objproto::kInvalid) << ar.status.message;

  // For itself, it is served as before: its own Publish is taken, its own withdrawal too.
  EXPECT_EQ(published(p->sender, ids[2], sender_addr).code, objproto::kOk);
  l.id = IdToWire(ids[2]);
  l.where = AddrToWire(sender_addr);
  p->sender->Send(p->receiver_addr, objproto::kDirUnpublish, Encode(l));
  (void)copies_listed(ids[2]);  // answered after the withdrawal, on the same connection
  EXPECT_EQ(published(p->receiver, ids[2], p->receiver_addr).code, objproto::kOk)
      << "the sender's withdrawn copy still holds the id";
}

}  // namespace
}  // namespace conduit::objects
