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
#ifndef CONDUIT_DAEMON_RPC_PROGRAM_SESSION_H_
#define CONDUIT_DAEMON_RPC_PROGRAM_SESSION_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/frame_stream.h"
#include "rpc/call.h"
#include "rpc/program_memory.h"
#include "rpc/served_program.h"
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
  // The daemon is shutting down: every call of this program ends (datapath Abort).
  void AbortCalls(const std::string& why);

  void Deliver(RpcCall& call, uint64_t id, Event ev) override;
  void Forget(uint64_t id) override;
  std::string name() const override { return who_; }

  // ServedProgram.
  void AddIncoming(const std::shared_ptr<RpcCall>& call) override;
  // This program's receive memory; false when the message is small enough to go inline or
  // that memory is exhausted.
  bool ReceiveBlock(size_t len, Message* out) override;
  std::shared_ptr<const TlsServerContext> TlsFor(uint32_t port) const override;

 private:
  struct Channel {
    Target target;
    // TLS channels: the program's credentials; the link made for this channel (another
    // host), or the server credentials they were checked against in memory (this host).
    std::shared_ptr<const TlsClientContext> tls;
    std::shared_ptr<PeerLink> link;
    std::shared_ptr<const TlsServerContext> checked_against;
    Metadata auth;  // what that in-memory handshake showed the server of this client
  };

  Status Hello(const FrameHeader& h);
  Status HandleFrame(const FrameHeader& h);
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
  Status CloseChannel(const std::string& payload);
  Status Serve(const std::string& payload, uint32_t tag, bool tls);
  Status Unserve(const std::string& payload, uint32_t tag);
  Status AttachSegment(const std::string& payload, uint32_t tag);
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
  std::map<uint32_t, uint64_t> server_of_port_;  // port -> the program's server id
  std::map<uint32_t, std::shared_ptr<const TlsServerContext>> tls_of_port_;  // TLS ports only
  size_t client_calls_ = 0;                      // calls in calls_ this program started
  std::atomic<uint64_t> next_incoming_{1};
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PROGRAM_SESSION_H_
