// Peers: the object service's view of the other daemons and its control messaging.
//
// Every daemon keeps one control connection to every other daemon of --object-peers
// (PeerHello, then tagged requests and replies, pings every 250 ms). A peer is live while
// that connection is up and answers; a killed daemon's connection closes at once and a
// frozen one is dropped after 2 s of silence. The live set (always including this daemon)
// defines the consistent-hash ring of directory shards.
//
// Handlers are registered per message type and run for requests from other daemons
// (on the connection's reader thread: they must not block) and for requests this daemon
// sends itself (Call/Send to self dispatch locally), so every directory and reduce
// operation has a single code path whichever daemon owns it. A handler may call `reply`
// later, from any thread, and more than once (subscriptions push events that way).
// Pushed frames (OnPush) are handled on the thread that receives them: a push handler must
// not block, nor wait for a reply from another daemon.
#ifndef CONDUIT_DAEMON_OBJECTS_PEERS_H_
#define CONDUIT_DAEMON_OBJECTS_PEERS_H_

#include <array>
#include <chrono>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/conn.h"
#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/peer_identity.h"
#include "common/stop_signal.h"
#include "common/version_range.h"
#include "objects/executor.h"
#include "objects/hash_ring.h"
#include "objects/messages.h"
#include "objects/obj_status.h"

namespace conduit {
class PeerSecurity;
}

namespace conduit::objects {

using ReplyFn = std::function<void(uint16_t type, Bytes body)>;
using Handler = std::function<void(const std::string& from, const Bytes& body, const ReplyFn& reply)>;

class Peers {
 public:
  // `security` authenticates (and, when the cluster encrypts, seals) every connection;
  // `versions`: the object protocol versions this daemon speaks with the others.
  Peers(std::string self, std::vector<std::string> peers, const PeerSecurity* security,
        VersionRange versions = {objproto::kOldestPeerVersion, objproto::kNewestPeerVersion});
  ~Peers();

  // Registration happens before Start.
  void Handle(uint16_t type, Handler handler);
  void OnChange(std::function<void()> changed);
  // Called (on the executor) when a control connection with `addr` comes up, either way:
  // that daemon may have marked this one down meanwhile and dropped its directory
  // locations (it has when this daemon's process was replaced by a live upgrade).
  void OnPeerUp(std::function<void(const std::string& addr)> up);
  void OnPush(std::function<void(uint16_t type, const Bytes& body)> push);
  void Start();

  // An incoming, authenticated control connection whose first frame (PeerHello) is still
  // unread.
  void ServeIncoming(Conn conn, const PeerIdentity& peer);

  const std::string& self() const { return self_; }
  const std::vector<std::string>& all() const { return all_; }
  std::vector<std::string> Live() const;
  bool IsLive(const std::string& addr) const;
  // The object protocol version this daemon's connection to `addr` negotiated (the newest
  // for itself), 0 while it is down: what `addr` understands of what this daemon sends.
  uint32_t VersionOf(const std::string& addr) const;
  // `addr` said (GoingAway) that its process is being replaced: until `grace_ms` from now
  // its locations are kept when its connections end (the next process holds the same
  // copies at the same address). A change of membership is announced when the grace ends.
  void NoteReplacing(const std::string& addr, int grace_ms);
  bool Replacing(const std::string& addr) const;
  // The live daemon owning the directory shard of `id`.
  std::string Owner(const std::string& id) const;
  // The daemons the hash ring was built from (the live set when it last changed).
  std::vector<std::string> RingMembers() const;
  // The lowest of the last 32 ping round trips, in microseconds (0 before the first pong):
  // pings queue behind bulk transfers on the same link, which is not per-hop latency.
  double rtt_us() const;

  // Request/reply; kUnavailable when `to` is down or dies before answering. A caller on a
  // latency path may first spin for the answer for up to `spin_micros` (yielding the CPU
  // between looks; common/busy_poll.h) before it sleeps: an answer that comes within that
  // time then costs no wake-up of the waiting thread.
  Status Call(const std::string& to, uint16_t type, Bytes body, uint16_t reply_type, Bytes* reply,
                 Deadline deadline, int spin_micros = 0);
  // The same in two halves, so a caller can do other work while the request travels.
  struct Outstanding;
  Outstanding Begin(const std::string& to, uint16_t type, Bytes body);
  Status Await(const Outstanding& call, uint16_t reply_type, Bytes* reply, Deadline deadline, int spin_micros = 0);
  // Or, instead of Await: runs `done` once the call has ended, at once when it has already,
  // else on the thread that ends it (a connection's reader or the ping loop: `done` must not
  // block). `done` gets Ok when an answer came (of any type), else why the call failed: `to`
  // went down, the daemon is stopping, or `deadline` passed first (kTimeout; looked at with
  // every ping, so up to a quarter second late). The deadline is what bounds a call to a live
  // daemon that never answers (a faulty or hostile one), and its entry in the channel's table.
  void Then(const Outstanding& call, std::function<void(const Status&)> done, Deadline deadline);
  // Runs fn later on the peers' executor thread (clean-ups off a latency path).
  void Defer(std::function<void()> fn) { executor_.Post(std::move(fn)); }
  // One-way; silently dropped when `to` is down (its death is handled through membership).
  void Send(const std::string& to, uint16_t type, Bytes body);
  // The daemon is shutting down (ObjectService::Stop): every call still waiting for its
  // answer ends with `why`, and every call begun from now on ends with it at once, so no
  // program's request waits out its deadline on a daemon that is going.
  void FailCalls(const Status& why);
  // FailCalls also ends the object store's threads: the connection and ping loops (their
  // connections are shut down), the executor, and every loop that sleeps through Pause.
  // Since FailCalls: a failed call is not worth retrying.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  // Sleeps for `period`; false, at once, once the daemon is stopping (FailCalls).
  bool Pause(std::chrono::milliseconds period) { return stop_.SleepFor(period); }
  // FailCalls' reason (Ok before it).
  Status StopReason() const;

  // While a Cork lives, the messages this thread sends to other daemons (Send, Begin) are
  // held and then written with one write per daemon, in order: a Reduce's reservation and
  // subscriptions cost one system call and one wake-up per daemon instead of one per
  // message (each a few tens of microseconds through a veth). A failed write takes the
  // connection down, which fails its outstanding calls as usual. Await a call begun under
  // a Cork only after the Cork ends. Corks do not nest: an inner one adds to the outer.
  class Cork {
   public:
    explicit Cork(Peers* peers);
    ~Cork();
    Cork(const Cork&) = delete;
    Cork& operator=(const Cork&) = delete;

   private:
    friend class Peers;
    struct Held;
    Peers* peers_;
    bool active_;
    std::vector<std::unique_ptr<Held>> held_;
  };

 private:
  struct Pending;
  struct Channel;
  struct Incoming;

 public:
  struct Outstanding {
    std::shared_ptr<Pending> p;
    Channel* ch = nullptr;
    uint32_t tag = 0;
    std::string to;
    uint16_t type = 0;
  };

 private:

  void ConnectLoop(Channel* ch);
  void ReadLoop(Channel* ch, Conn& conn);
  void PingLoop();
  void MarkDown(Channel* ch, int fd, const std::string& why);
  // Ends the calls whose Then deadline has passed (kTimeout); run with every ping.
  void ExpireCalls();
  // Writes one message on `fd` (still ch's), or holds it for this thread's Cork.
  Status Write(Channel* ch, int fd, uint16_t type, uint32_t tag, const Bytes& body);
  void WriteHeld(Channel* ch, int fd, const std::string& frames);
  void Dispatch(uint16_t type, const std::string& from, const Bytes& body, const ReplyFn& reply);
  void Changed();
  Channel* Find(const std::string& addr) const;
  // A call this daemon answers itself, kept for FailCalls (or failed at once after it).
  void RememberLocal(const std::shared_ptr<Pending>& p);

  const std::string self_;
  std::vector<std::string> all_;
  const PeerSecurity* security_;
  const VersionRange versions_;
  std::map<uint16_t, Handler> handlers_;
  std::function<void()> changed_;
  std::function<void(const std::string&)> peer_up_;
  mutable std::mutex replacing_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> replacing_;  // addr -> end of grace
  std::function<void(uint16_t, const Bytes&)> push_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::mutex change_mu_;  // serializes Changed(): live set read + ring swap
  mutable std::mutex ring_mu_;
  std::shared_ptr<const HashRing> ring_;
  mutable std::mutex rtt_mu_;
  std::array<double, 32> rtt_samples_{};
  size_t rtt_next_ = 0;
  // Shutdown (FailCalls): set once, before the calls in flight are failed.
  std::atomic<bool> stopping_{false};
  StopSignal stop_;
  mutable std::mutex calls_mu_;  // stopped_, local_calls_
  Status stopped_;
  std::vector<std::weak_ptr<Pending>> local_calls_;
  size_t prune_local_at_ = 64;
  Executor executor_;
  // One-way messages to this daemon itself that the executor has not dispatched yet. A call
  // to itself made meanwhile is queued behind them, so it cannot overtake them (an abandoned
  // Put's Unpublish must not land after the next Put's Publish of the same id).
  std::atomic<int> self_sends_queued_{0};
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_PEERS_H_
