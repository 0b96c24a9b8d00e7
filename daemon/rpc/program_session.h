// ProgramSession: one gRPC program's connection to the RPC service (libmrpc-grpc).
//
// It answers the program's setup requests (Hello, segments, channels, servers) and turns
// its Call frames into events on RpcCalls: calls it makes (this session is their client
// end) and calls to its servers (the server end). Message bytes arrive in its send
// segments and leave through its receive segments (program_memory.h). When the program
// goes away, every call it was part of fails towards the other end.
//
// The program is not trusted: it is admitted by the executable the kernel names for the
// connecting process (not the name its Hello claims), every count and size it sends is
// checked, what it may hold is capped (channels, calls, ports, shared memory; RpcOptions),
// and a frame it started must arrive whole within the frame deadline.
//
// A live upgrade (docs/upgrade.md, "RPC programs", "RPC calls in flight") moves a session
// with its calls in flight: while a park is on, the session holds, in order, every request
// of its program (its calls' next events too), which the next process serves first; it
// stops once every link to another daemon is parked (no event of its calls arrives any
// more) and nothing of its own is being sent. What moves: the shared memory, channels,
// served ports, calls in flight (rpc/call_handover.h), the held requests and what was
// read ahead.
#ifndef CONDUIT_DAEMON_RPC_PROGRAM_SESSION_H_
#define CONDUIT_DAEMON_RPC_PROGRAM_SESSION_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/frame_stream.h"
#include "rpc/call.h"
#include "rpc/program_memory.h"
#include "rpc/served_program.h"
#include "rpc/session_handover.h"
#include "rpc/target.h"
#include "security/tls_session.h"
#include "server/service.h"

namespace conduit::rpc {

class PeerLink;
class RpcContext;

class ProgramSession : public ServedProgram, public std::enable_shared_from_this<ProgramSession> {
 public:
  ProgramSession(RpcContext* service, UniqueFd fd, const ProgramCredentials& creds);
  ~ProgramSession() override;

  // Serves the connection until the program disconnects or misbehaves.
  void Run();
  // Serves a connection handed over by the process this daemon replaced, from where that
  // one stopped: `state` and `fds` (checked as any input) are its SavedState. `restored`
  // runs once the state is taken (or refused), before the session serves anything.
  void RunAdopted(const std::string& state, std::vector<UniqueFd> fds, const std::function<void()>& restored);
  // The daemon is shutting down: every call of this program ends (datapath Abort).
  void AbortCalls(const std::string& why);

  void Deliver(RpcCall& call, uint64_t id, Event ev) override;
  void Forget(uint64_t id) override;
  std::string name() const override { return who_; }

  // ServedProgram.
  bool AddIncoming(const std::shared_ptr<RpcCall>& call, uint32_t port) override;
  // This program's receive memory; false when the message is small enough to go inline or
  // that memory is exhausted.
  bool ReceiveBlock(size_t len, Message* out) override;
  std::shared_ptr<const TlsServerContext> TlsFor(uint32_t port) const override;

 private:
  struct Channel {
    std::string text;  // the target as the program wrote it
    Target target;
    // TLS channels: the program's credentials; the link made for this channel (another
    // host), or the server credentials they were checked against in memory (this host).
    std::shared_ptr<const TlsClientContext> tls;
    std::shared_ptr<PeerLink> link;
    std::shared_ptr<const TlsServerContext> checked_against;
    Metadata auth;  // what that in-memory handshake showed the server of this client
  };

  struct Port {
    uint64_t server = 0;                          // the program's server id
    std::string host;                             // the bind address as the program wrote it
    std::shared_ptr<const TlsServerContext> tls;  // TLS ports only
  };

  void MakeMemory();
  Status Hello(const FrameHeader& h);
  // Serves requests until the connection ends or fails, stopping at the park when asked.
  Status ServeConnection();
  void Finish(const Status& st);
  // Reads the next request, then serves or holds it.
  Status ReadRequest();
  // Serves `f` now, or holds it while a park is on (see the header comment).
  Status Admit(ProgramFrame f);
  // Serves `f` as a start under way (RpcContext::starts_under_way) unless a park is on;
  // *served false then, and `f` untouched.
  Status ServeCounted(ProgramFrame& f, bool* served);
  // Serves the held requests once the park is over (stops if another begins).
  Status ServeHeld();
  Status HandleFrame(ProgramFrame& f);
  // Whether the session may stop for a live upgrade: none of its calls starting, nothing
  // being sent, no call waiting on a rate limit's delay, and every link parked.
  bool Idle();
  Status SavedState(std::string* state, std::vector<UniqueFd>* fds);
  Status Restore(const std::string& state, std::vector<UniqueFd> fds);
  Status HandleCall(std::string payload);
  Status StartCall(const CallEvent& view, Event ev);
  Status OpenChannel(const std::string& payload, uint32_t tag, bool tls);
  // Whether calls of `ch` may reach `port` here, as the same TLS settings natively would
  // connect (a TLS client to a TLS server whose certificate it trusts, and the reverse;
  // or neither side with TLS). Runs the in-memory handshake when the server's credentials
  // are not the ones `ch` was checked against.
  Status CheckLocalSecurity(Channel* ch, const ServedProgram& server);
  // Makes `ch`'s own TLS link to the daemon of its target.
  Status ConnectTlsLink(Channel* ch);
  // The link a call of channel `channel` (`ch`, a copy) to another host takes: the pool's
  // link to that daemon, or the channel's own TLS link, made again when it broke or its
  // daemon said GoAway.
  Status LinkFor(uint64_t channel, Channel* ch, std::shared_ptr<PeerLink>* out);
  Status CloseChannel(const std::string& payload);
  Status Serve(const std::string& payload, uint32_t tag, bool tls);
  Status Unserve(const std::string& payload, uint32_t tag);
  Status AttachSegment(const std::string& payload, uint32_t tag, UniqueFd fd);
  // Registers a server port (Serve, and a restored session's ports).
  Status AddPort(uint32_t port, uint64_t server, const std::string& host, std::optional<TlsServerConfig> tls);
  Status Reply(uint16_t type, uint32_t tag, const void* payload, size_t len);
  Status ReplyStatus(uint16_t type, uint32_t tag, const Status& status);
  // Fails a call the program just started before it reached anyone.
  void Refuse(uint64_t id, int32_t code, const std::string& why);
  void Send(OutFrame frame);
  void EndAll(const std::string& why);

  RpcContext* service_;
  UniqueFd fd_;
  ProgramCredentials creds_;
  std::string who_;
  FrameReader reader_;
  std::unique_ptr<FrameWriter> writer_;
  std::shared_ptr<ProgramMemory> memory_;

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<RpcCall>> calls_;
  std::map<uint64_t, Channel> channels_;
  std::map<uint32_t, Port> ports_;  // what the program serves through conduitd
  std::deque<ProgramFrame> held_;  // the session's own thread only
  size_t client_calls_ = 0;                      // calls in calls_ this program started
  std::atomic<uint64_t> next_incoming_{1};
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PROGRAM_SESSION_H_
