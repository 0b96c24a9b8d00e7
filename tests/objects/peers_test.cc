// Peers (daemon/objects/peers.h) between two instances in this process over loopback TCP:
// what a Cork holds back, and that it goes out whole and in order when the Cork ends; and a
// DirectoryShard and a Reducer behind the receiver, which take a daemon's word only for
// that daemon.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "objects/directory.h"
#include "objects/messages.h"
#include "objects/obj_status.h"
#include "objects/peers.h"
#include "objects/reducer.h"
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
  explicit Pair(const std::function<void(Peers*, const PeerSecurity*)>& serve_also = nullptr) {
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
    if (serve_also) serve_also(receiver, receiver_security);
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

// Then runs its function once a call has ended, whichever way: on the reader's thread when the
// answer comes, at once when the call had ended already (a call to itself, answered inline),
// and when the peer is unknown. A shard's Delete waits for its holders' DropCopyDone this way.
TEST(PeersThen, RunsOnceTheCallHasEnded) {
  static Pair* p = new Pair();
  std::mutex mu;
  std::condition_variable cv;
  int ran = 0;
  std::vector<Status> ends;
  auto note = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    ++ran;
    ends.push_back(st);
    cv.notify_all();
  };
  auto wait_ran = [&](int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return ran >= n; });
  };
  // Answered later by the receiver; Then is registered before the answer can arrive: the call
  // is corked until the Cork ends.
  {
    Peers::Cork cork(p->sender);
    Peers::Outstanding call = p->sender->Begin(p->receiver_addr, kEcho, B("then"));
    p->sender->Then(call, note, Deadline::AfterMs(10000));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(ran, 0) << "ran before the call was even sent";
  }
  ASSERT_TRUE(wait_ran(1));
  // Ended before Then (a daemon that is not a peer fails at once): runs on this thread, now.
  Peers::Outstanding failed = p->sender->Begin("127.0.0.9:9", kEcho, B("nobody"));
  p->sender->Then(failed, note, Deadline::AfterMs(10000));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(ran, 2);
  }
  // The answer also stays there for Await.
  Peers::Outstanding again = p->sender->Begin(p->receiver_addr, kEcho, B("both"));
  p->sender->Then(again, note, Deadline::Never());
  Bytes reply;
  Status st = p->sender->Await(again, kEchoReply, &reply, Deadline::AfterMs(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(S(reply), "both");
  ASSERT_TRUE(wait_ran(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ran, 3) << "a call's function ran more than once";
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_TRUE(ends[0].ok()) << ends[0].message();
  EXPECT_EQ(ObjectCodeOf(ends[1]), objproto::kUnavailable) << ends[1].message();
  EXPECT_TRUE(ends[2].ok()) << ends[2].message();
}

// A live daemon that never answers (its handler drops the request) cannot hold a Then call
// forever: the call ends with kTimeout once its deadline has passed, its entry leaves the
// channel's table, and the connection stays up for other calls. A shard's Delete is bounded
// this way when a holder does not confirm its drop.
constexpr uint16_t kSilent = 0x7f06;  // received, never answered

TEST(PeersThen, EndsACallThatIsNeverAnsweredAtItsDeadline) {
  static Pair* p = new Pair([](Peers* receiver, const PeerSecurity*) {
    receiver->Handle(kSilent, [](const std::string&, const Bytes&, const ReplyFn&) {});
  });
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Status> ends;
  auto note = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    ends.push_back(st);
    cv.notify_all();
  };
  const auto start = std::chrono::steady_clock::now();
  p->sender->Then(p->sender->Begin(p->receiver_addr, kSilent, B("never answered")), note, Deadline::AfterMs(300));
  // With no deadline the call would wait for an answer that never comes (the peer is live:
  // it answers pings); the test waits well past the deadline plus one ping period.
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return !ends.empty(); }))
        << "a call to a live daemon that never answers did not end at its deadline";
    EXPECT_EQ(ObjectCodeOf(ends[0]), objproto::kTimeout) << ends[0].message();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(300)) << "ended before its deadline";
  EXPECT_TRUE(p->sender->IsLive(p->receiver_addr)) << "a late answer is not a dead peer";
  // The connection still carries calls, and ends each once.
  Bytes reply;
  Status st = p->sender->Call(p->receiver_addr, kEcho, B("still up"), kEchoReply, &reply, Deadline::AfterMs(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(S(reply), "still up");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ends.size(), 1u) << "a call's function ran more than once";
}

// A daemon's messages to itself keep their order as on a connection: a call does not
// overtake a one-way message sent before it (the executor dispatches those; calls used to
// run at once on the caller's thread, so an abandoned Put's Unpublish could land after the
// next Put's Publish of the same id and withdraw the new copy).
constexpr uint16_t kWhere = 0x7f05;  // answered with kEchoReply; notes the thread it ran on

TEST(PeersToItself, ACallDoesNotOvertakeOneWayMessagesSentBeforeIt) {
  static std::thread::id ran_on;
  static Pair* p = new Pair([](Peers* receiver, const PeerSecurity*) {
    receiver->Handle(kWhere, [](const std::string&, const Bytes& body, const ReplyFn& answer) {
      ran_on = std::this_thread::get_id();
      answer(kEchoReply, body);
    });
  });
  Peers* self = p->receiver;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  // Holds the executor, as a busy one would, until the call has been begun.
  self->Defer([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
  });
  self->Send(p->receiver_addr, kNote, B("sent first"));
  Peers::Outstanding call = self->Begin(p->receiver_addr, kEcho, B("called second"));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  Bytes reply;
  Status st = self->Await(call, kEchoReply, &reply, Deadline::AfterMs(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(S(reply), "called second");
  EXPECT_EQ(p->WaitFor(2), (std::vector<std::string>{"sent first", "called second"}));

  // With nothing queued a call to itself runs at once, on the caller's thread.
  st = self->Call(p->receiver_addr, kWhere, B("x"), kEchoReply, &reply, Deadline::AfterMs(10000));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// The first integer after "key": in json (-1 if absent).
long long JsonNumber(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\":";
  const size_t at = json.find(quoted);
  return at == std::string::npos ? -1 : std::atoll(json.c_str() + at + quoted.size());
}

// A caller may spin for its answer before it sleeps (Await's spin_micros, used by the
// directory calls): the answer is the same whether it comes during the spin or after it,
// and the spin never outlasts the call's deadline.
constexpr uint16_t kLater = 0x7f07;  // answered with kEchoReply after the milliseconds its body names

TEST(PeersAwait, ASpinningCallGetsItsAnswerDuringOrAfterTheSpinAndKeepsItsDeadline) {
  static Pair* p = new Pair([](Peers* receiver, const PeerSecurity*) {
    receiver->Handle(kSilent, [](const std::string&, const Bytes&, const ReplyFn&) {});
    receiver->Handle(kLater, [](const std::string&, const Bytes& body, const ReplyFn& reply) {
      const int ms = std::atoi(S(body).c_str());
      std::thread([reply, body, ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        reply(kEchoReply, body);
      }).detach();
    });
  });
  for (const char* ms : {"0", "50"}) {  // within a 200 us spin (mostly), and long after it
    Bytes reply;
    Status st = p->sender->Call(p->receiver_addr, kLater, B(ms), kEchoReply, &reply, Deadline::AfterMs(10000), 200);
    ASSERT_TRUE(st.ok()) << ms << " ms: " << st.message();
    EXPECT_EQ(S(reply), ms);
  }
  // A spin far longer than the deadline: the call ends at the deadline, not the spin's end.
  const auto start = std::chrono::steady_clock::now();
  Bytes reply;
  Status st = p->sender->Call(p->receiver_addr, kSilent, B("never"), kEchoReply, &reply, Deadline::AfterMs(100),
                              20 * 1000 * 1000);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ObjectCodeOf(st), objproto::kTimeout) << st.message();
  EXPECT_GE(took, std::chrono::milliseconds(100));
  EXPECT_LT(took, std::chrono::seconds(5)) << "the spin outlasted the call's deadline";
  // A call that has failed already (no such peer) ends at once, spin or not.
  st = p->sender->Call("127.0.0.9:9", kEcho, B("nobody"), kEchoReply, &reply, Deadline::AfterMs(10000),
                       20 * 1000 * 1000);
  EXPECT_EQ(ObjectCodeOf(st), objproto::kUnavailable) << st.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// The sender is authenticated as 127.0.0.1:1; whatever daemon its messages name, the
// directory acts for that one only.
TEST(DirectoryShard, TakesADaemonsWordOnlyForItsOwnCopies) {
  static DirectoryShard* shard = nullptr;
  static Pair* p = new Pair([](Peers* receiver, const PeerSecurity*) {
    shard = new DirectoryShard(receiver, /*store_copy_bytes=*/0);  // leaked, like the Peers it serves on
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

// What a Reducer needs to run reduce nodes (the node side only: no Reduce starts here).
class NodeHost : public ReducerHost {
 public:
  NodeHost(Peers* peers, const PeerSecurity* security)
      : peers_(peers), store_(64 << 20, 64 << 10), directory_(peers), pool_(security) {
    options_.self = peers->self();
    options_.timeout_ms = 20000;
  }
  const ObjectOptions& options() const override { return options_; }
  Peers& peers() override { return *peers_; }
  LocalStore& store() override { return store_; }
  DirectoryClient& directory() override { return directory_; }
  DataPool& pool() override { return pool_; }
  TransferStats& transfer_stats() override { return stats_; }
  void PublishReduceTarget(const ObjectRef&, bool) override {}
  void AbandonReduceTarget(const std::string&, const LocalObject*, const Status&) override {}

 private:
  ObjectOptions options_;
  Peers* peers_;
  LocalStore store_;
  DirectoryClient directory_;
  DataPool pool_;
  TransferStats stats_;
};

// A reduce node is started and cancelled by the coordinator its key names, the sender
// here (127.0.0.1:1), and by no other daemon.
TEST(Reducer, OnlyTheCoordinatorStartsAndCancelsItsNodes) {
  static NodeHost* host = nullptr;  // leaked with the Peers it serves on
  static Reducer* reducer = nullptr;
  static Pair* p = new Pair([](Peers* receiver, const PeerSecurity* security) {
    host = new NodeHost(receiver, security);
    reducer = new Reducer(host);
    reducer->Register();
  });
  constexpr uint64_t kSize = 4096;
  ObjectRef own;  // the node's own source object, on the receiver
  ASSERT_TRUE(host->store().Create("node-own", kSize, CopyInfo{}, &own).ok());
  own->MarkComplete();
  auto node_start = [&](const std::string& coordinator) {
    objproto::NodeStart s{};
    s.key.value = 42;
    s.key.coordinator = AddrToWire(coordinator);
    s.slot = 0;
    s.gen = 1;
    s.own = IdToWire("node-own");
    s.output = IdToWire("\x01r-test/0/1");
    s.size = kSize;
    s.op = ncclSum;
    s.dtype = ncclFloat32;
    s.nchildren = 1;
    s.timeout_ms = 20000;
    objproto::ChildInfo child{};
    child.slot = -1;  // not filled yet: the task waits for it
    return Encode(s, &child, sizeof(child));
  };
  auto cancel_all = [](const std::string& coordinator) {
    objproto::NodeCancel c{};
    c.key.value = 42;
    c.key.coordinator = AddrToWire(coordinator);
    c.slot = -1;
    c.gen = 0;
    return Encode(c);
  };
  auto tasks = [] { return JsonNumber(reducer->StateJson(), "tasks"); };
  auto after_the_sender = [&] {  // what the sender sent before was handled
    Bytes reply;
    ASSERT_TRUE(p->sender->Call(p->receiver_addr, kEcho, B("barrier"), kEchoReply, &reply, Deadline::AfterMs(10000)).ok());
  };
  const std::string sender_addr = p->sender->self();

  // The sender starts a node in the receiver's name: refused.
  p->sender->Send(p->receiver_addr, objproto::kNodeStart, node_start(p->receiver_addr));
  after_the_sender();
  EXPECT_EQ(tasks(), 0);
  // In its own name: the node runs (waiting for its child).
  p->sender->Send(p->receiver_addr, objproto::kNodeStart, node_start(sender_addr));
  after_the_sender();
  EXPECT_EQ(tasks(), 1);
  // Another daemon (the receiver itself) cancels the sender's reduce: ignored.
  p->receiver->Send(p->receiver_addr, objproto::kNodeCancel, cancel_all(sender_addr));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(tasks(), 1);
  // The coordinator cancels it.
  p->sender->Send(p->receiver_addr, objproto::kNodeCancel, cancel_all(sender_addr));
  after_the_sender();
  EXPECT_EQ(tasks(), 0);
}

}  // namespace
}  // namespace conduit::objects
