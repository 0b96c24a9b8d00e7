// DaemonConnection: this program's one connection to its host's conduitd (RPC service).
//
// It owns the Unix socket, the shared memory (send segments this side fills, receive
// segments the daemon fills, the control region with the two release rings) and a reader
// thread that routes incoming Call frames to managed calls and servers and answers the
// control requests app threads wait on. When the daemon goes away every call still routed
// here fails with UNAVAILABLE and waiting requests fail promptly.
#ifndef CONDUIT_LIBMRPC_GRPC_DAEMON_CONNECTION_H_
#define CONDUIT_LIBMRPC_GRPC_DAEMON_CONNECTION_H_

#include <grpc/grpc.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "common/frame_stream.h"
#include "common/rpc_event.h"
#include "common/shm_heap.h"
#include "call_sink.h"
#include "common/shm_segment.h"
#include "protocol/rpc_protocol.h"

struct grpc_fd;

namespace conduit::grpcshim {

class DaemonConnection;
class ReceiveSegments;

// What the reader thread hands a managed server: incoming calls for it, and the loss of
// the connection (ManagedServer implements it, so that this file need not know servers).
class IncomingCallHandler {
 public:
  virtual void OnIncomingCall(const std::shared_ptr<DaemonConnection>& conn, const rpc::CallEvent& start,
                              grpc_byte_buffer* message) = 0;
  virtual void OnConnectionLost(const std::string& why) = 0;

 protected:
  ~IncomingCallHandler() = default;
};

// A message ready to go in a Call frame: where it lies in a send segment, or its bytes.
struct PlacedMessage {
  rpc::MessageWire wire{};
  std::string inline_bytes;
  bool valid = false;
};

class DaemonConnection : public std::enable_shared_from_this<DaemonConnection> {
 public:
  // Connects to $CONDUIT_SOCKET (or the default) and says Hello; nullptr with *why when
  // there is no daemon or it refuses this program.
  static std::shared_ptr<DaemonConnection> Connect(std::string* why);
  static std::string SocketPath();
  ~DaemonConnection();

  bool alive() const { return alive_.load(std::memory_order_acquire); }
  std::string failure() const;
  uint32_t timeout_ms() const { return timeout_ms_; }
  // Whether managed servers also listen natively (the daemon's choice, told in Hello).
  bool native_listeners() const { return native_listeners_; }
  // The daemon carries TLS channels and ports (rpcproto::kHelloTls).
  bool tls() const { return tls_; }

  // A control request answered through the reader thread; waits at most the daemon's
  // timeout. *reply gets the whole reply payload (starting with a WireStatus).
  Status Request(uint16_t type, const void* payload, size_t len, uint16_t reply_type, std::string* reply,
                 int pass_fd = -1);

  // Calls: ids this side picks for client calls; incoming (server) calls use the daemon's.
  uint64_t NewCallId() { return next_call_id_.fetch_add(1, std::memory_order_relaxed); }
  // Routes incoming events for `id` to `call` (which it refs) until Unregister.
  bool Register(uint64_t id, CallSink* call);
  void Unregister(uint64_t id);
  void RegisterServer(uint64_t server_id, std::shared_ptr<IncomingCallHandler> server);
  void UnregisterServer(uint64_t server_id);

  // Copies a message the program wants to send into a send segment, or keeps it for the
  // frame itself when it is small or shared memory is exhausted.
  Status PlaceMessage(const grpc_byte_buffer* bb, PlacedMessage* out);
  // Makes room for a `len`-byte message in the send segments, attaching a new one if
  // needed, so PlaceMessage need not grow. Call without holding any call lock.
  void ReserveSendSpace(size_t len);
  // Gives back a placed message that will not be sent.
  void Unplace(PlacedMessage* msg);
  // Builds a Call frame around `ev` (carrying `msg` when given) and queues it; never
  // blocks. Flush sends what is queued (call it after dropping call locks).
  void QueueCall(rpc::CallEvent ev, PlacedMessage* msg);
  void Flush();
  // Tells the daemon a channel is gone (one-way; queued, it leaves with the next flush, so
  // it never blocks whoever drops the channel's last reference).
  void QueueCloseChannel(uint64_t channel);

 private:
  DaemonConnection() = default;
  Status Hello();
  void ReadLoop();
  void PollWithGrpc();
  // Reads and handles every whole frame already there, unless another thread is reading.
  bool TryDrain();
  static void OnReadable(void* arg, absl::Status error);

 public:
  // Connections whose socket gRPC polls (kept for the life of the process).
  static std::vector<std::shared_ptr<DaemonConnection>>& PolledConnections();
  // Hands the socket back from gRPC's pollers to this connection's thread.
  void StopPollingWithGrpc();

 private:
  Status HandleFrame(const FrameHeader& h);
  Status HandleCall(std::string payload);
  void Die(const std::string& why);
  bool AllocateSend(size_t len, uint32_t* segment, uint64_t* offset);
  void DrainReleasedSends();
  void FreeSend(uint32_t segment, uint64_t offset);
  void SendFree(const rpcproto::FreeEntry& entry);

  UniqueFd fd_;
  std::unique_ptr<FrameReader> reader_;
  std::unique_ptr<FrameWriter> writer_;
  // Who reads: with polled_by_grpc_, whoever holds read_mu_ (gRPC's poller through
  // OnReadable, a thread waiting for a reply, the fallback thread); else the reader thread.
  std::atomic<bool> polled_by_grpc_{false};
  std::mutex grpc_mu_;
  int released_fd_ = -1;
  alignas(16) unsigned char orphan_done_[128];
  std::mutex read_mu_;
  std::atomic<std::chrono::steady_clock::time_point> last_drain_{};
  // What gRPC's poller watches instead of fd_ (InputOnlyPollFd): watched directly, every
  // frame we send would wake a poller thread for nothing once the daemon read it (and, in
  // gRPC's sync server, pass the poller role between its threads: four futex calls a call).
  UniqueFd poll_fd_;
  ::grpc_fd* grpc_fd_ = nullptr;  // set once, under grpc_mu_
  alignas(16) unsigned char closure_[128];  // a grpc_closure (its layout: real_grpc.h)
  std::atomic<bool> alive_{false};
  uint32_t timeout_ms_ = 10000;
  uint32_t inline_max_ = 512;
  bool native_listeners_ = false;
  bool tls_ = false;
  std::atomic<uint64_t> next_call_id_{1};

  mutable std::mutex mu_;
  std::string failure_;
  std::unordered_map<uint64_t, CallSink*> calls_;
  std::unordered_map<uint64_t, std::shared_ptr<IncomingCallHandler>> servers_;
  struct Pending {
    uint16_t reply_type;
    bool done = false;
    std::string reply;
    std::string error;
  };
  std::map<uint32_t, Pending*> pending_;
  uint32_t next_tag_ = 1;
  std::condition_variable pending_cv_;

  // Shared memory. The control region and receive segments are shared with the byte
  // buffers handed to the program, which may outlive this connection.
  std::shared_ptr<ReceiveSegments> receive_;
  std::mutex send_mu_;
  struct SendSegment {
    std::unique_ptr<ShmSegment> shm;
    std::unique_ptr<ShmHeap> heap;
  };
  std::vector<SendSegment> send_segments_;
  uint64_t send_bytes_ = 0;
  uint64_t to_shim_tail_ = 0;  // our copy of the consumer index of the release ring
  bool growing_ = false;  // send_mu_
  std::mutex free_mu_;
  std::vector<rpcproto::FreeEntry> released_;  // from Free frames, applied by the next sender
};

// Before gRPC's last shutdown: every connection stops using gRPC's pollers.
void ReleaseGrpcPollers();
// Whether the program holds a gRPC initialization (grpc_init without its grpc_shutdown).
bool GrpcInitialized();

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_DAEMON_CONNECTION_H_
