// ManagedCall: a gRPC call carried by conduitd instead of gRPC's transport.
//
// The program holds it as an ordinary grpc_call* and drives it with grpc_call_start_batch;
// this class implements the batch semantics of gRPC core (which ops a side may start, one
// outstanding op of each kind, what each op yields and when its batch completes) on top of
// Call frames exchanged with the daemon, and posts each finished batch to the program's
// completion queue. Calls live in a slab of their own, so telling a managed grpc_call*
// from a native one is an address check.
//
// Threads: program threads (StartBatch, Cancel, Ref/Unref), the connection's reader thread
// (OnEvent, OnConnectionLost) and the timer thread (OnDeadline). One mutex per call; no
// completion is posted and no frame is flushed while it is held.
#ifndef CONDUIT_LIBMRPC_GRPC_CALL_H_
#define CONDUIT_LIBMRPC_GRPC_CALL_H_

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "auth_context.h"
#include "common/rpc_event.h"
#include "compression.h"
#include "call_sink.h"
#include "daemon_connection.h"
#include "message_limits.h"

namespace conduit::grpcshim {

class ManagedChannel;
class ManagedCall;

// What a managed server hears from the calls it handed out (ManagedServer implements it,
// so that call.cc need not include server.h, which includes this).
class ServerCallObserver {
 public:
  // A waiting call learnt its first message or was cancelled.
  virtual void OnWaitingCallChanged(ManagedCall* call) = 0;
  // A call handed to the program finished (status sent or cancelled).
  virtual void OnCallFinished(ManagedCall* call) = 0;

 protected:
  ~ServerCallObserver() = default;
};

class ManagedCall final : public CallSink {
 public:
  // Whether `call` was made here (an address check, no locks).
  static bool IsManaged(const grpc_call* call);
  static ManagedCall* From(const grpc_call* call) {
    return reinterpret_cast<ManagedCall*>(const_cast<grpc_call*>(call));
  }
  grpc_call* AsGrpc() { return reinterpret_cast<grpc_call*>(this); }

  // A client call on a managed channel; the program holds the one reference.
  static ManagedCall* NewClient(std::shared_ptr<ManagedChannel> channel, std::shared_ptr<DaemonConnection> conn,
                                grpc_completion_queue* cq, std::string method, std::string authority,
                                gpr_timespec deadline, MessageLimits limits);
  // An incoming call for a managed server, not yet handed to the program.
  static ManagedCall* NewServer(std::shared_ptr<ServerCallObserver> server, std::shared_ptr<DaemonConnection> conn,
                                const rpc::CallEvent& start, MessageLimits limits, CompressionOptions compression);

  // The program's API.
  grpc_call_error StartBatch(const grpc_op* ops, size_t nops, void* tag);
  grpc_call_error Cancel(grpc_status_code code, const char* details) override;
  // grpc_call_set_credentials (call_credentials.h): their metadata goes with the call's
  // initial metadata, or the call fails as gRPC fails it on an insecure channel.
  grpc_call_error SetCredentials(grpc_call_credentials* creds);
  void AppRef();
  void AppUnref();
  void* ArenaAlloc(size_t size);
  char* Peer();
  // Server calls from a TLS client: its identity (auth_context.h), one more reference for
  // the caller; nullptr otherwise.
  grpc_auth_context* AuthContext();
  int FailedBeforeRecvMessage();
  bool TrailersOnly();
  absl::string_view Authority() const { return authority_; }
  gpr_timespec deadline() const { return deadline_; }

  // What gRPC's call accessors report (grpc_call_is_client, grpc_call_test_only_*, ...),
  // as a native call would: the algorithm of the peer's messages, the flags of the last
  // message received, the algorithms the peer accepts, the algorithm for a level.
  bool is_client() const { return client_; }
  grpc_compression_algorithm IncomingAlgorithm();
  uint32_t LastMessageFlags();
  uint32_t PeerAcceptedEncodings();
  grpc_compression_algorithm AlgorithmForLevel(grpc_compression_level level);
  // grpc_call_context_get/set: slots other libraries (census, tracers) keep on a call.
  static constexpr int kContextSlots = 8;
  void* ContextGet(int index);
  void ContextSet(int index, void* value, void (*destroy)(void*));
  void SetCompletionQueue(grpc_completion_queue* cq);

  // Cancellation propagation (GRPC_PROPAGATE_CANCELLATION): `child`, a managed or native
  // call created with this server call as its parent, is cancelled when this call is.
  // Holds a reference to the child until this call ends.
  void AddChild(grpc_call* child);
  // A client call whose parent is a native call: the stand-in watching that parent
  // (native_parent.h), ended when this call ends. nullptr does nothing.
  void SetNativeParentWatch(grpc_call* stand_in);

  // Internal references (batches, timers, the connection's routing table).
  void Ref() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() override;

  // From the connection's reader thread.
  void OnEvent(const rpc::CallEvent& ev, grpc_byte_buffer* message) override;
  void OnConnectionLost(const std::string& why) override;
  // From the timer thread.
  void OnDeadline() override;

  // Server side, for ManagedServer: hand the call to the program (bound to `cq`), filling
  // what the request asked for. `payload` takes the first message when non-null.
  void BindToProgram(grpc_completion_queue* cq, grpc_metadata_array* initial_metadata, gpr_timespec* deadline,
                     grpc_byte_buffer** payload, grpc_call_details* details);
  // Whether the first message (or its absence) is known, for methods that want it up front.
  bool PayloadKnown();
  // Refuses a call the program never took (server shutting down, no such method).
  void Reject(grpc_status_code code, const char* details);
  const std::string& method() const { return method_; }
  bool is_finished();

 private:
  struct Batch;
  struct PendingRecv {
    Batch* batch = nullptr;
    grpc_metadata_array* metadata = nullptr;
    grpc_byte_buffer** message = nullptr;
    grpc_status_code* status = nullptr;
    grpc_slice* details = nullptr;
    const char** error_string = nullptr;
    int* cancelled = nullptr;
  };
  // Sends waiting for flow-control credit, in order.
  struct HeldSend {
    Batch* batch = nullptr;
    const grpc_byte_buffer* message = nullptr;
    grpc_byte_buffer* compressed = nullptr;  // ours: `message` compressed (sent instead)
    uint32_t extra_sections = 0;  // HalfClose or Status queued behind the message
    int32_t status_code = 0;
    std::string details;
    std::string trailers;
    uint32_t trailer_count = 0;
  };
  using Ready = std::vector<Batch*>;
  // What a locked section leaves to do once the lock is dropped.
  struct Deferred {
    bool flush = false;
    bool unregister = false;
    uint64_t timer = 0;
    bool finished_server_call = false;
    bool waiting_changed = false;
    std::vector<grpc_call*> children;  // to let go of (and cancel, when cancel_children)
    bool cancel_children = false;
    grpc_call* parent_watch = nullptr;  // to end (EndNativeParentWatch)
  };
  // A message received and not yet taken by the program.
  struct Incoming {
    grpc_byte_buffer* message;
    uint64_t wire_bytes;  // as sent (compressed), for flow-control credit
    uint32_t flags;       // what grpc_call_test_only_get_message_flags shows once taken
  };

  ManagedCall() = default;
  ~ManagedCall() = default;
  void Destroy();
  void Init(std::shared_ptr<DaemonConnection> conn, bool client, MessageLimits limits);

  grpc_call_error Validate(const grpc_op* ops, size_t nops);
  // StartBatch, one handler per gRPC op (lock held). Sends gather into one event of the
  // daemon protocol (BatchWork, call.cc); receives complete at once or wait on the call.
  struct BatchWork;
  void SendInitialMetadata(const grpc_op& op, BatchWork& w);
  void SendMessage(const grpc_op& op, BatchWork& w);
  void SendCloseFromClient(BatchWork& w);
  void SendStatusFromServer(const grpc_op& op, BatchWork& w);
  void RecvInitialMetadata(const grpc_op& op, BatchWork& w);
  void RecvMessage(const grpc_op& op, BatchWork& w);
  void RecvStatusOnClient(const grpc_op& op, BatchWork& w);
  void RecvCloseOnServer(const grpc_op& op, BatchWork& w);
  void OpDone(Batch* b, bool ok, Ready* ready);
  void PostReady(Ready* ready);
  void FillMetadata(grpc_metadata_array* array, const std::string* block, uint32_t count);
  const std::string* Keep(std::string_view bytes);
  void DeliverMessage(grpc_byte_buffer** out, Ready* ready);
  // Initial metadata as gRPC puts it on the wire: the program's, without the keys gRPC
  // keeps to itself, plus user-agent (client), grpc-accept-encoding and grpc-encoding;
  // picks the call's outgoing algorithm.
  uint32_t EncodeInitialMetadata(const grpc_op& op, std::string* block);
  // The peer's initial metadata without grpc-encoding and grpc-accept-encoding, which set
  // the incoming algorithm and the peer's accepted set.
  uint32_t TakeCompressionMetadata(const rpc::MetadataView& md, std::string* block);
  // `bb` compressed with the outgoing algorithm (owned by the caller), or nullptr when it
  // goes as it is.
  grpc_byte_buffer* MaybeCompress(const grpc_byte_buffer* bb, uint32_t write_flags);
  // Places a message, or its compressed form when there is one, for sending.
  Status Place(const grpc_byte_buffer* message, grpc_byte_buffer* compressed, PlacedMessage* placed);
  // Replaces *message, which arrived compressed, by its decompressed form; on failure
  // leaves it and returns the status the call ends with.
  grpc_status_code Inflate(grpc_byte_buffer** message, std::string* why);
  void FillStatus(const PendingRecv& r);
  void FinishClient(grpc_status_code code, std::string details, std::string_view trailers, uint32_t trailer_count,
                    Ready* ready);
  void FinishServer(bool cancelled, Ready* ready);
  void FailPendingRecvs(Ready* ready);
  void FailHeldSends(Ready* ready);
  void SendHeld(Ready* ready);
  void QueueEvent(rpc::CallEvent ev, PlacedMessage* msg);
  void QueueCancel(grpc_status_code code, std::string_view details);
  // Runs body(&ready) under the lock, then what it left for after the lock.
  template <typename Body>
  void Locked(Body body);
  // Ends the call at once (lock held), telling the other side when asked to.
  void EndNow(grpc_status_code code, const std::string& details, bool tell_peer, Ready* ready);
  Deferred TakeDeferred();
  void RunDeferred(const Deferred& d);
  void ArmDeadline(int64_t timeout_us);

  // Set at creation, then read-only.
  bool client_ = true;
  std::shared_ptr<DaemonConnection> conn_;
  std::shared_ptr<ManagedChannel> channel_;
  std::shared_ptr<ServerCallObserver> server_;
  uint64_t id_ = 0;
  std::string method_;
  std::string authority_;
  std::string peer_;
  MessageLimits limits_;
  gpr_timespec deadline_{};
  int64_t timeout_us_ = rpc::kNoTimeout;

  std::atomic<int> refs_{0};
  std::atomic<int> app_refs_{0};

  std::mutex mu_;
  grpc_completion_queue* cq_ = nullptr;
  bool bound_ = false;              // server: handed to the program
  bool registered_ = false;         // in the connection's routing table
  bool need_unregister_ = false;    // take it out after unlocking
  bool need_flush_ = false;
  uint64_t timer_ = 0;
  bool cancel_timer_ = false;
  bool reported_finished_ = false;  // the server heard it finished
  // Sending.
  bool sent_initial_ = false;
  bool sent_close_ = false;         // client half-close, or server status
  uint64_t unacked_ = 0;            // message bytes the receiver has not credited yet
  std::deque<HeldSend> held_;
  // Receiving.
  std::string initial_md_;          // server: the client's metadata (from Start)
  AuthProperties auth_;             // server: the client's TLS identity (from Start)
  grpc_auth_context* auth_context_ = nullptr;  // made from auth_ at the first AuthContext()
  uint32_t initial_md_count_ = 0;
  bool headers_received_ = false;
  const std::string* headers_ = nullptr;
  uint32_t headers_count_ = 0;
  std::deque<Incoming> messages_;
  bool end_of_messages_ = false;    // client: status came; server: half-close or cancel
  bool received_message_ = false;
  uint64_t consumed_unreported_ = 0;
  // Outcome.
  bool finished_ = false;           // client: final status known; server: status sent or cancelled
  bool cancelled_ = false;          // server: cancelled (by the client, a deadline, or itself)
  bool trailers_only_ = false;
  grpc_status_code status_ = GRPC_STATUS_OK;
  std::string status_details_;
  const std::string* trailers_ = nullptr;
  uint32_t trailers_count_ = 0;
  // Pending receives.
  PendingRecv recv_initial_;
  PendingRecv recv_message_;
  PendingRecv recv_status_;
  PendingRecv recv_close_;
  // Storage the program's slices point into; lives as long as the call.
  std::vector<std::unique_ptr<std::string>> kept_;
  // grpc_call_arena_alloc.
  std::vector<void*> arena_;
  // Compression (compression.h) and the inspectors' view of it.
  CompressionOptions compression_;
  std::string user_agent_;  // client: what gRPC would send for the channel
  std::vector<std::pair<std::string, std::string>> credentials_md_;  // client: from call credentials
  grpc_compression_algorithm send_algorithm_ = GRPC_COMPRESS_NONE;
  grpc_compression_algorithm recv_algorithm_ = GRPC_COMPRESS_NONE;
  uint32_t peer_accepted_ = 1u << GRPC_COMPRESS_NONE;
  uint32_t last_message_flags_ = 0;
  struct ContextSlot {
    void* value = nullptr;
    void (*destroy)(void*) = nullptr;
  };
  ContextSlot context_[kContextSlots];
  std::vector<grpc_call*> children_;  // referenced; see AddChild
  bool release_children_ = false;     // this call ended: let go of (or cancel) the children
  grpc_call* parent_watch_ = nullptr;  // see SetNativeParentWatch

  friend class CallSlab;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CALL_H_
