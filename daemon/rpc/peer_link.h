// PeerLink: the RPC transport between two daemons, one TCP connection that multiplexes
// every call between them (the transport module; another one would implement the same
// Endpoint). The connecting daemon (the callers' side) starts calls on it; the accepting
// daemon delivers them to the programs that serve the ports they name.
//
// Messages travel as fragments of at most kFragmentBytes inside Call frames, written
// straight from the sending program's shared segment and read straight into the receiving
// program's. With the QoS policy on, frames of messages above its threshold are bulk: the
// link's writer sends every small frame queued before them, across calls and programs
// (a call's own frames keep their order). A malformed frame, a lost connection or an
// unanswered write ends the link: its calls fail with UNAVAILABLE on both sides. An
// accepting daemon being replaced asks for no more calls (GoAway, link version 3): the
// connecting daemon takes another link for its next calls and closes this one after the
// last (docs/rpc-protocol.md). Either daemon being replaced hands the link itself, with its
// calls, to its new process (SavedState, Adopt): the other daemon sees only a pause.
//
// The other daemon is not trusted with this daemon's memory or threads: every length in
// its frames is checked before use, a message's private memory grows with the fragments
// that arrive (within a per-link budget), the calls it may have open are capped, a frame
// it started must arrive whole within the frame deadline, and calls it starts reach only
// servers whose bind address admits a call arriving at this link's local address.
#ifndef CONDUIT_DAEMON_RPC_PEER_LINK_H_
#define CONDUIT_DAEMON_RPC_PEER_LINK_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/conn.h"
#include "common/frame_stream.h"
#include "common/peer_identity.h"
#include "rpc/accepted_link.h"
#include "rpc/call.h"
#include "rpc/event.h"
#include "security/tls_session.h"

namespace conduit::upgrade::v1 {
class RpcLinkState;
}

namespace conduit::rpc {

class ServedProgram;
class RpcContext;

class PeerLink : public Endpoint, public AcceptedLink, public std::enable_shared_from_this<PeerLink> {
 public:
  static constexpr size_t kFragmentBytes = 256 << 10;

  // Connects to the daemon at `addr`, authenticates it and says hello; the link then reads
  // on its own thread.
  static Status Connect(RpcContext* service, const std::string& addr, std::shared_ptr<PeerLink>* out);
  // A TLS link for one channel to `port` at the daemon at `addr`: after the hello, the TLS
  // handshake with the channel's credentials against the server's (rpc/tls_flights.h). It
  // carries calls to that port only.
  static Status ConnectTls(RpcContext* service, const std::string& addr, uint32_t port,
                           std::shared_ptr<const TlsClientContext> tls, std::shared_ptr<PeerLink>* out);
  // Serves an authenticated connection another daemon opened, on the calling thread, until
  // it ends.
  static void Accept(RpcContext* service, Conn conn, const PeerIdentity& peer);
  ~PeerLink() override;

  bool alive() const { return alive_.load(std::memory_order_acquire); }
  // Connecting side: the link is up and the other daemon has not asked for no more calls
  // (GoAway): a new call may start on it.
  bool accepting_calls();
  // The link version both daemons speak (rpcproto::kMinPeerLinkVersion..kPeerLinkVersion).
  uint32_t link_version() const override { return link_version_; }
  // Accepting side, a live upgrade: asks the other daemon to start no more calls here
  // (GoAway); it closes the link after its last call. False when its link version has no
  // GoAway (an older release), which the link then keeps.
  bool GoAway() override;
  // Asks the other daemon whether a program there serves `port` for callers from this
  // host: Ok when it does, else why not (no such server, or one bound to loopback or to
  // another address).
  // *tls: the port is served with TLS (insecure channels must not reach it).
  Status Probe(uint32_t port, bool* tls);
  // Makes this link the server end of `call` (connecting side); false, changing nothing,
  // once the other daemon said GoAway (the caller takes another link).
  bool AddCall(const std::shared_ptr<RpcCall>& call);

  // A TLS link whose channel is gone, or a link whose daemon said GoAway: closes once no
  // call is left on it (at once when none is), quietly on both sides.
  void ReleaseWhenIdle();
  // The daemon is shutting down: the link closes now, its calls (already failed by their
  // sessions) end, and its reader stops.
  void Close(const std::string& why) { Fail(why, /*quiet=*/true); }

  // A live upgrade (docs/upgrade.md, "RPC calls in flight"): links stop at the context's
  // link park between two frames, once no message is half-read and nothing is left to
  // write, and move to the new process with their calls; the other daemon sees a pause.
  // The parked link's state, all but its connection (upgrade_state.proto RpcLinkState).
  Status SavedState(std::string* state);
  // The new process: the link `state` describes, on `fd` (checked as any input: lengths,
  // versions, its calls joined through service->adopted_calls()). It reads nothing until
  // StartAdopted.
  static Status Adopt(RpcContext* service, UniqueFd fd, const upgrade::v1::RpcLinkState& state,
                      std::shared_ptr<PeerLink>* out);
  // Starts the adopted link's reader (an accepted one counted as a connection from another
  // daemon, as Accept's); false when no thread can be started (the link then fails).
  bool StartAdopted();
  bool accepted() const { return accepted_; }
  const std::string& peer() const { return peer_; }
  // TLS links carry the calls of one program's channel.
  bool tls() const { return tls_port_ != 0; }

  void Deliver(RpcCall& call, uint64_t id, Event ev) override;
  void Forget(uint64_t id) override;
  std::string name() const override { return "daemon " + peer_; }

 private:
  // A call as this link sees it: where its incoming message is being assembled, and how
  // many of its bulk frames are still queued (later frames of the call must not pass them).
  struct LinkCall {
    ~LinkCall();
    std::shared_ptr<RpcCall> call;
    Event pending;  // sections received with the fragments so far
    // The message whose fragments are arriving: in a block of the receiving program's
    // receive memory, or in private memory that grows with the bytes that arrive, charged
    // to the link's budget.
    bool assembling = false;
    uint64_t total = 0;
    uint64_t received = 0;
    Message block;
    std::string partial;
    std::shared_ptr<std::atomic<uint64_t>> budget;
    uint64_t charged = 0;
    std::atomic<int> bulk_queued{0};
  };
  struct ProbeWait {
    bool answered = false;
    bool served = false;
    bool tls = false;
    std::string why;
  };

  PeerLink(RpcContext* service, Conn conn, std::string peer, bool accepted);
  static Status ConnectWith(RpcContext* service, const std::string& addr, uint32_t tls_port,
                            std::shared_ptr<const TlsClientContext> tls, std::shared_ptr<PeerLink>* out);
  // One connection offering link version `version`; *refused when the other daemon
  // answered the hello with an error (an older release refuses a newer version).
  static Status Dial(RpcContext* service, const std::string& addr, uint32_t version, uint32_t tls_port,
                     std::shared_ptr<const TlsClientContext> tls, std::shared_ptr<PeerLink>* out, bool* refused);
  // Accepting side: which program credentials a hello naming `tls_port` gets the handshake
  // with; an error when no program serves that port here with TLS.
  Status TlsServerFor(uint32_t tls_port, std::shared_ptr<const TlsServerContext>* out);
  // Accepting side: why a call to `port` served by `session` may not pass this link ("" when
  // it may); *stale when this TLS link's handshake was with credentials the server no
  // longer has.
  std::string RefusalFor(uint32_t port, const ServedProgram& session, bool* stale);
  void ReadLoop();
  // Whether the link may stop for a live upgrade: between messages on every call, nothing
  // queued to write, no probe waiting for its answer.
  bool Quiet();
  Status HandleFrame(const FrameHeader& h);
  Status HandleCall(const FrameHeader& h);
  Status StartIncoming(const CallEvent& view, std::shared_ptr<LinkCall>* out);
  // Charges `n` more private bytes of `lc`'s message to the link's budget; false when
  // that would pass the cap.
  bool Charge(LinkCall& lc, uint64_t n);
  // Ends a call this link's peer overran (budget): a status or cancel both ways.
  void Abandon(const std::shared_ptr<LinkCall>& lc, uint64_t id, int32_t code, const std::string& why);
  void Forward(const std::shared_ptr<RpcCall>& call, Event ev);
  void SendStatus(uint64_t id, int32_t code, const std::string& why);
  // Ends the link: every call on it fails with UNAVAILABLE (`quiet`: logged at debug level,
  // for a TLS link closed because its channel is gone).
  void Fail(const std::string& why, bool quiet = false);

  RpcContext* service_;
  Conn conn_;  // sealed when the cluster encrypts (--encrypt-peers)
  std::string peer_;
  bool accepted_;  // the other daemon connected: it starts the calls
  // Accepted links: this daemon's address the other daemon dialled (getsockname), the
  // address its calls reached this host at.
  std::string local_ip_;
  // TLS links: the one port they carry calls to (0: an insecure link) and, accepting, the
  // server credentials of the handshake and what it showed of the client.
  uint32_t tls_port_ = 0;
  std::shared_ptr<const TlsServerContext> tls_server_;
  TlsPeer tls_client_;
  Metadata tls_auth_;  // AuthProperties(tls_client_), given to every call's server
  FrameReader reader_;
  FrameWriter writer_;
  std::atomic<bool> alive_{true};
  std::atomic<bool> release_when_idle_{false};
  uint32_t link_version_ = 0;  // set before the link reads or writes calls
  std::atomic<bool> told_to_go_{false};  // accepting side: GoAway sent (its close is expected)

  std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<LinkCall>> calls_;
  // Private bytes of incomplete incoming messages, shared with the LinkCalls charged.
  std::shared_ptr<std::atomic<uint64_t>> assembling_ = std::make_shared<std::atomic<uint64_t>>(0);
  uint64_t next_call_ = 1;
  bool draining_ = false;  // connecting side: the other daemon said GoAway
  std::map<uint32_t, ProbeWait> probes_;
  uint32_t next_probe_ = 1;
  std::condition_variable probe_cv_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PEER_LINK_H_
