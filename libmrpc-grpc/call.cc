#include "call.h"

#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>

#include "byte_buffers.h"
#include "call_internal.h"
#include "call_credentials.h"
#include "channel.h"
#include "common/log.h"
#include "completion.h"
#include "handoff.h"
#include "metadata.h"
#include "native_parent.h"
#include "real_grpc.h"
#include "timer_queue.h"

namespace conduit::grpcshim {


// Calls live in one reserved address range, so IsManaged is a range check.
class CallSlab {
 public:
  static constexpr size_t kSlot = (sizeof(ManagedCall) + 255) & ~size_t{255};
  static constexpr size_t kSlots = 1 << 18;

  static CallSlab& Get() {
    static CallSlab* slab = new CallSlab();
    return *slab;
  }
  bool Contains(const void* p) const {
    uintptr_t off = reinterpret_cast<uintptr_t>(p) - base_;
    return base_ != 0 && off < kSlot * kSlots && off % kSlot == 0;
  }
  ManagedCall* New() {
    void* at = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        at = free_.back();
        free_.pop_back();
      } else if (used_ < kSlots) {
        at = reinterpret_cast<void*>(base_ + kSlot * used_++);
      }
    }
    return at == nullptr ? nullptr : new (at) ManagedCall();
  }
  void Delete(ManagedCall* call) {
    call->~ManagedCall();
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(call);
  }

 private:
  CallSlab() {
    void* p = mmap(nullptr, kSlot * kSlots, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) base_ = reinterpret_cast<uintptr_t>(p);
  }
  uintptr_t base_ = 0;
  std::mutex mu_;
  size_t used_ = 0;
  std::vector<void*> free_;
};

namespace {

gpr_timespec DeadlineFromTimeout(int64_t timeout_us) {
  const RealGrpc& g = Real();
  if (timeout_us == rpc::kNoTimeout) return g.gpr_inf_future(GPR_CLOCK_MONOTONIC);
  gpr_timespec t = g.gpr_now(GPR_CLOCK_MONOTONIC);
  t.tv_sec += timeout_us / 1000000;
  t.tv_nsec += static_cast<int32_t>((timeout_us % 1000000) * 1000);
  if (t.tv_nsec >= 1000000000) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000;
  }
  return t;
}

grpc_slice CopiedSlice(std::string_view s) { return Real().grpc_slice_from_copied_buffer(s.data(), s.size()); }

void AppendEntry(std::string* block, uint32_t* count, std::string_view key, std::string_view value) {
  rpc::AppendMetadata(block, key, value);
  ++*count;
}

// gRPC's largest message (its lengths are 32-bit signed): what decompression may produce
// when the program set no receive limit.
constexpr uint64_t kLargestMessage = 0x7fffffff;

// A child call (managed or native) cancelled because its parent was.
void CancelChild(grpc_call* child) {
  if (ManagedCall::IsManaged(child)) {
    ManagedCall::From(child)->Cancel(GRPC_STATUS_CANCELLED, "Cancelled (propagated from the parent call)");
  } else {
    Real().grpc_call_cancel(child, nullptr);
  }
}

// Deferred work on a child call: cancel (when asked) and drop the parent's reference.
void ReleaseChild(grpc_call* child, bool cancel) {
  if (cancel) CancelChild(child);
  if (ManagedCall::IsManaged(child)) {
    ManagedCall::From(child)->Unref();
  } else {
    Real().grpc_call_unref(child);
  }
}

// A byte buffer of our own holding a copy of `bytes`.
grpc_byte_buffer* NewByteBuffer(std::string_view bytes) {
  const RealGrpc& g = Real();
  grpc_slice slice = g.grpc_slice_from_copied_buffer(bytes.data(), bytes.size());
  grpc_byte_buffer* bb = g.grpc_raw_byte_buffer_create(&slice, 1);
  g.grpc_slice_unref(slice);
  return bb;
}

}  // namespace

int64_t MicrosUntil(gpr_timespec deadline) {
  const RealGrpc& g = Real();
  if (deadline.tv_sec == INT64_MAX) return rpc::kNoTimeout;
  gpr_timespec now = g.gpr_now(GPR_CLOCK_MONOTONIC);
  gpr_timespec mono = g.gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
  int64_t us = (mono.tv_sec - now.tv_sec) * 1000000 + (mono.tv_nsec - now.tv_nsec) / 1000;
  return us < 0 ? 0 : us;
}


bool ManagedCall::IsManaged(const grpc_call* call) { return CallSlab::Get().Contains(call); }

void ManagedCall::Init(std::shared_ptr<DaemonConnection> conn, bool client, MessageLimits limits) {
  conn_ = std::move(conn);
  client_ = client;
  limits_ = limits;
}

ManagedCall* ManagedCall::NewClient(std::shared_ptr<ManagedChannel> channel, std::shared_ptr<DaemonConnection> conn,
                                    grpc_completion_queue* cq, std::string method, std::string authority,
                                    gpr_timespec deadline, MessageLimits limits) {
  ManagedCall* call = CallSlab::Get().New();
  if (call == nullptr) return nullptr;
  call->Init(std::move(conn), /*client=*/true, limits);
  call->channel_ = std::move(channel);
  call->cq_ = cq;
  call->bound_ = true;
  call->method_ = std::move(method);
  call->authority_ = std::move(authority);
  call->peer_ = "ipv4:" + call->channel_->target();
  call->deadline_ = deadline;
  call->compression_ = call->channel_->compression();
  call->user_agent_ = call->channel_->user_agent();
  call->refs_ = 1;  // the program's
  call->app_refs_ = 1;
  call->id_ = call->conn_->NewCallId();
  call->registered_ = call->conn_->Register(call->id_, call);
  int64_t timeout = MicrosUntil(deadline);
  if (timeout != rpc::kNoTimeout) call->ArmDeadline(timeout);
  if (!call->registered_) {
    Ready ready;
    std::lock_guard<std::mutex> lock(call->mu_);
    call->FinishClient(GRPC_STATUS_UNAVAILABLE, "conduit: lost contact with conduitd: " + call->conn_->failure(), {},
                       0, &ready);
  }
  return call;
}

ManagedCall* ManagedCall::NewServer(std::shared_ptr<ServerCallObserver> server, std::shared_ptr<DaemonConnection> conn,
                                    const rpc::CallEvent& start, MessageLimits limits,
                                    CompressionOptions compression) {
  ManagedCall* call = CallSlab::Get().New();
  if (call == nullptr) return nullptr;
  call->Init(std::move(conn), /*client=*/false, limits);
  call->server_ = std::move(server);
  call->id_ = start.call;
  call->method_ = std::string(start.method);
  call->authority_ = std::string(start.authority);
  call->peer_ = start.peer.empty() ? "conduit" : std::string(start.peer);
  start.auth.ForEach([&](std::string_view name, std::string_view value) {
    call->auth_.emplace_back(std::string(name), std::string(value));
  });
  call->timeout_us_ = start.timeout_us;
  call->deadline_ = DeadlineFromTimeout(start.timeout_us);
  call->compression_ = compression;
  call->initial_md_count_ = call->TakeCompressionMetadata(start.initial_md, &call->initial_md_);
  call->refs_ = 1;  // the server's, while it waits for a request
  call->registered_ = call->conn_->Register(call->id_, call);
  if (start.timeout_us != rpc::kNoTimeout) call->ArmDeadline(start.timeout_us);
  return call;
}

void ManagedCall::ArmDeadline(int64_t timeout_us) {
  timer_ = TimerQueue::Get().Schedule(TimerQueue::Clock::now() + std::chrono::microseconds(timeout_us), this);
}

// ---------------------------------------------------------------- references

void ManagedCall::AppRef() {
  app_refs_.fetch_add(1, std::memory_order_relaxed);
  Ref();
}

void ManagedCall::AppUnref() {
  if (app_refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    // The program let go of the call: like gRPC, cancel it if it is still running.
    Cancel(GRPC_STATUS_CANCELLED, "Cancelled");
  }
  Unref();
}

void ManagedCall::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) Destroy();
}

void ManagedCall::Destroy() {
  const RealGrpc& g = Real();
  for (const Incoming& in : messages_) g.grpc_byte_buffer_destroy(in.message);
  for (void* p : arena_) free(p);
  for (ContextSlot& slot : context_) {
    if (slot.destroy != nullptr) slot.destroy(slot.value);
  }
  for (grpc_call* child : children_) ReleaseChild(child, /*cancel=*/false);
  EndNativeParentWatch(parent_watch_);
  if (auth_context_ != nullptr) g.grpc_auth_context_release(auth_context_);  // ours; gRPC may hold more
  CallSlab::Get().Delete(this);
}

void* ManagedCall::ArenaAlloc(size_t size) {
  void* p = nullptr;
  if (posix_memalign(&p, 16, size == 0 ? 16 : size) != 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  arena_.push_back(p);
  return p;
}

char* ManagedCall::Peer() { return Real().gpr_strdup(peer_.c_str()); }

grpc_auth_context* ManagedCall::AuthContext() {
  std::lock_guard<std::mutex> lock(mu_);
  if (auth_context_ == nullptr) auth_context_ = NewAuthContext(auth_);
  return RefAuthContext(auth_context_);
}

int ManagedCall::FailedBeforeRecvMessage() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ && !received_message_ && status_ != GRPC_STATUS_OK ? 1 : 0;
}

bool ManagedCall::TrailersOnly() {
  std::lock_guard<std::mutex> lock(mu_);
  return trailers_only_;
}

grpc_compression_algorithm ManagedCall::IncomingAlgorithm() {
  std::lock_guard<std::mutex> lock(mu_);
  return recv_algorithm_;
}

uint32_t ManagedCall::LastMessageFlags() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_message_flags_;
}

uint32_t ManagedCall::PeerAcceptedEncodings() {
  std::lock_guard<std::mutex> lock(mu_);
  return peer_accepted_;
}

grpc_compression_algorithm ManagedCall::AlgorithmForLevel(grpc_compression_level level) {
  std::lock_guard<std::mutex> lock(mu_);
  return grpcshim::AlgorithmForLevel(level, peer_accepted_);
}

void* ManagedCall::ContextGet(int index) {
  if (index < 0 || index >= kContextSlots) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  return context_[index].value;
}

void ManagedCall::ContextSet(int index, void* value, void (*destroy)(void*)) {
  if (index < 0 || index >= kContextSlots) {
    CLOG_ERROR("grpc_call_context_set: no context slot %d on a call carried by conduitd", index);
    if (destroy != nullptr) destroy(value);
    return;
  }
  ContextSlot old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = context_[index];
    context_[index] = ContextSlot{value, destroy};
  }
  // As gRPC: a value set over another destroys the other.
  if (old.destroy != nullptr) old.destroy(old.value);
}

void ManagedCall::SetCompletionQueue(grpc_completion_queue* cq) {
  std::lock_guard<std::mutex> lock(mu_);
  cq_ = cq;
}

void ManagedCall::AddChild(grpc_call* child) {
  bool cancel_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finished_) {
      if (ManagedCall::IsManaged(child)) {
        ManagedCall::From(child)->Ref();
      } else {
        Real().grpc_call_ref(child);
      }
      children_.push_back(child);
      return;
    }
    cancel_now = cancelled_;
  }
  if (cancel_now) CancelChild(child);
}

void ManagedCall::SetNativeParentWatch(grpc_call* stand_in) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finished_) {
      parent_watch_ = stand_in;
      return;
    }
  }
  EndNativeParentWatch(stand_in);
}

bool ManagedCall::is_finished() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

// ---------------------------------------------------------------- helpers (lock held)

const std::string* ManagedCall::Keep(std::string_view bytes) {
  kept_.push_back(std::make_unique<std::string>(bytes));
  return kept_.back().get();
}

void ManagedCall::FillMetadata(grpc_metadata_array* array, const std::string* block, uint32_t count) {
  if (array == nullptr || block == nullptr || count == 0) return;
  AppendToArray(array, rpc::MetadataView{count, *block});
}

void ManagedCall::OpDone(Batch* b, bool ok, Ready* ready) {
  if (!ok) b->ok = false;
  if (--b->pending == 0) ready->push_back(b);
}

void ManagedCall::PostReady(Ready* ready) {
  if (!ready->empty()) HandOff(this);
  for (Batch* b : *ready) {
    PostCompletion(b->cq, b->tag, b->ok);
    delete b;
    Unref();
  }
  ready->clear();
}

void ManagedCall::QueueEvent(rpc::CallEvent ev, PlacedMessage* msg) {
  ev.call = id_;
  conn_->QueueCall(ev, msg);
  need_flush_ = true;
}

void ManagedCall::QueueCancel(grpc_status_code code, std::string_view details) {
  if (!registered_) return;
  rpc::CallEvent ev;
  ev.sections = rpc::kCancel;
  ev.cancel_code = code == GRPC_STATUS_OK ? GRPC_STATUS_CANCELLED : code;
  ev.cancel_details = details;
  QueueEvent(ev, nullptr);
}

void ManagedCall::DeliverMessage(grpc_byte_buffer** out, Ready*) {
  Incoming in = messages_.front();
  messages_.pop_front();
  *out = in.message;
  last_message_flags_ = in.flags;
  consumed_unreported_ += in.wire_bytes;
  if (consumed_unreported_ >= kWindowBytes / 4 && !end_of_messages_ && !finished_) {
    rpc::CallEvent ev;
    ev.sections = rpc::kWindow;
    ev.window = consumed_unreported_;
    consumed_unreported_ = 0;
    QueueEvent(ev, nullptr);
  }
}

void ManagedCall::FailPendingRecvs(Ready* ready) {
  if (recv_initial_.batch != nullptr) {
    Batch* b = recv_initial_.batch;
    recv_initial_ = {};
    OpDone(b, true, ready);
  }
  if (recv_message_.batch != nullptr && messages_.empty()) {
    Batch* b = recv_message_.batch;
    *recv_message_.message = nullptr;
    recv_message_ = {};
    OpDone(b, client_, ready);
  }
}

void ManagedCall::FailHeldSends(Ready* ready) {
  for (HeldSend& h : held_) {
    if (h.compressed != nullptr) Real().grpc_byte_buffer_destroy(h.compressed);
    OpDone(h.batch, false, ready);
  }
  held_.clear();
}

void ManagedCall::FillStatus(const PendingRecv& r) {
  *r.status = status_;
  *r.details = CopiedSlice(status_details_);
  if (r.error_string != nullptr) {
    *r.error_string = status_ == GRPC_STATUS_OK ? nullptr : Real().gpr_strdup(("conduit: " + status_details_).c_str());
  }
  FillMetadata(r.metadata, trailers_, trailers_count_);
}

void ManagedCall::FinishClient(grpc_status_code code, std::string details, std::string_view trailers,
                               uint32_t trailer_count, Ready* ready) {
  if (finished_) return;
  finished_ = true;
  end_of_messages_ = true;
  status_ = code;
  status_details_ = std::move(details);
  trailers_ = trailer_count > 0 ? Keep(trailers) : nullptr;
  trailers_count_ = trailer_count;
  if (!headers_received_) trailers_only_ = true;
  if (recv_initial_.batch != nullptr) {
    Batch* b = recv_initial_.batch;
    recv_initial_ = {};
    OpDone(b, true, ready);
  }
  if (recv_message_.batch != nullptr) {
    Batch* b = recv_message_.batch;
    *recv_message_.message = nullptr;
    recv_message_ = {};
    OpDone(b, true, ready);
  }
  if (recv_status_.batch != nullptr) {
    Batch* b = recv_status_.batch;
    FillStatus(recv_status_);
    recv_status_ = {};
    OpDone(b, true, ready);
  }
  FailHeldSends(ready);
  need_unregister_ = true;
  cancel_timer_ = true;
}

void ManagedCall::FinishServer(bool cancelled, Ready* ready) {
  if (finished_) return;
  finished_ = true;
  cancelled_ = cancelled;
  release_children_ = !children_.empty();
  if (cancelled) {
    end_of_messages_ = true;
    FailPendingRecvs(ready);
    FailHeldSends(ready);
  }
  if (recv_close_.batch != nullptr) {
    Batch* b = recv_close_.batch;
    *recv_close_.cancelled = cancelled ? 1 : 0;
    recv_close_ = {};
    OpDone(b, true, ready);
  }
  need_unregister_ = true;
  cancel_timer_ = true;
}

void ManagedCall::SendHeld(Ready* ready) {
  while (!held_.empty() && unacked_ <= kWindowBytes * 3 / 4) {
    HeldSend h = std::move(held_.front());
    held_.pop_front();
    PlacedMessage placed;
    Status st = Place(h.message, h.compressed, &placed);
    if (h.compressed != nullptr) Real().grpc_byte_buffer_destroy(h.compressed);
    rpc::CallEvent ev;
    ev.sections = h.extra_sections;
    if (h.extra_sections & rpc::kStatus) {
      ev.status_code = h.status_code;
      ev.status_details = h.details;
      ev.trailers = rpc::MetadataView{h.trailer_count, h.trailers};
    }
    if (st.ok()) unacked_ += placed.wire.total_length;
    QueueEvent(ev, st.ok() ? &placed : nullptr);
    OpDone(h.batch, st.ok(), ready);
    if ((h.extra_sections & rpc::kStatus) != 0) FinishServer(false, ready);
  }
}

ManagedCall::Deferred ManagedCall::TakeDeferred() {
  Deferred d;
  d.flush = need_flush_;
  need_flush_ = false;
  if (need_unregister_ && registered_) {
    d.unregister = true;
    registered_ = false;
  }
  need_unregister_ = false;
  if (cancel_timer_ && timer_ != 0) {
    d.timer = timer_;
    timer_ = 0;
  }
  d.finished_server_call = !client_ && bound_ && finished_ && !reported_finished_;
  if (d.finished_server_call) reported_finished_ = true;
  d.waiting_changed = !client_ && !bound_;
  if (release_children_) {
    release_children_ = false;
    d.children.swap(children_);
    d.cancel_children = cancelled_;
  }
  if (finished_) std::swap(d.parent_watch, parent_watch_);
  return d;
}

void ManagedCall::RunDeferred(const Deferred& d) {
  if (d.flush) conn_->Flush();
  if (d.unregister) conn_->Unregister(id_);
  if (d.timer != 0) {
    if (CallSink* c = TimerQueue::Get().Cancel(d.timer)) c->Unref();
  }
  if (d.finished_server_call) server_->OnCallFinished(this);
  if (d.waiting_changed) server_->OnWaitingCallChanged(this);
  for (grpc_call* child : d.children) ReleaseChild(child, d.cancel_children);
  EndNativeParentWatch(d.parent_watch);
}

// ---------------------------------------------------------------- compression

uint32_t ManagedCall::EncodeInitialMetadata(const grpc_op& op, std::string* block) {
  const auto& send = op.data.send_initial_metadata;
  std::optional<grpc_compression_algorithm> requested;
  uint32_t count = 0;
  for (size_t i = 0; i < send.count; ++i) {
    std::string_view key = SliceView(send.metadata[i].key);
    std::string_view value = SliceView(send.metadata[i].value);
    if (key == kEncodingRequestKey) {
      requested = AlgorithmByName(value);
      if (!requested) CLOG_ERROR("unknown compression algorithm '%.*s' requested", int(value.size()), value.data());
      continue;
    }
    // gRPC sets these itself (a client's user-agent replaces the program's).
    if (key == rpc::kEncodingKey || key == kAcceptEncodingKey || (client_ && key == "user-agent")) continue;
    AppendEntry(block, &count, key, value);
  }
  // gRPC's order: a level (a server's per call, or the default level) picks among what the
  // peer accepts and overrides a requested algorithm; else the request; else the default.
  std::optional<grpc_compression_level> level = compression_.default_level;
  if (!client_ && send.maybe_compression_level.is_set) level = send.maybe_compression_level.level;
  grpc_compression_algorithm algorithm = compression_.default_algorithm;
  if (level) {
    algorithm = grpcshim::AlgorithmForLevel(*level, peer_accepted_);
  } else if (requested) {
    algorithm = *requested;
  }
  if ((compression_.enabled & (1u << algorithm)) == 0) {
    CLOG_ERROR("compression algorithm %s is disabled on this %s: messages go uncompressed",
               std::string(AlgorithmName(algorithm)).c_str(), client_ ? "channel" : "server");
    algorithm = GRPC_COMPRESS_NONE;
  }
  send_algorithm_ = algorithm;
  if (client_) {
    for (const auto& [key, value] : credentials_md_) AppendEntry(block, &count, key, value);
    AppendEntry(block, &count, "user-agent", user_agent_);
  }
  AppendEntry(block, &count, kAcceptEncodingKey, AcceptEncodingValue(compression_.enabled));
  if (algorithm != GRPC_COMPRESS_NONE) AppendEntry(block, &count, rpc::kEncodingKey, AlgorithmName(algorithm));
  return count;
}

uint32_t ManagedCall::TakeCompressionMetadata(const rpc::MetadataView& md, std::string* block) {
  uint32_t count = 0;
  md.ForEach([&](std::string_view key, std::string_view value) {
    if (key == rpc::kEncodingKey) {
      recv_algorithm_ = AlgorithmByName(value).value_or(GRPC_COMPRESS_NONE);
    } else if (key == kAcceptEncodingKey) {
      peer_accepted_ = ParseAcceptEncoding(value);
    } else {
      AppendEntry(block, &count, key, value);
    }
  });
  return count;
}

grpc_byte_buffer* ManagedCall::MaybeCompress(const grpc_byte_buffer* bb, uint32_t write_flags) {
  if (send_algorithm_ == GRPC_COMPRESS_NONE || (write_flags & GRPC_WRITE_NO_COMPRESS) != 0) return nullptr;
  if (bb->type != GRPC_BB_RAW || bb->data.raw.compression != GRPC_COMPRESS_NONE) return nullptr;
  std::string packed;
  if (!rpc::Compress(ToEncoding(send_algorithm_), FlattenByteBuffer(bb), &packed)) return nullptr;
  return NewByteBuffer(packed);
}

grpc_status_code ManagedCall::Inflate(grpc_byte_buffer** message, std::string* why) {
  uint64_t cap = limits_.max_receive >= 0 ? static_cast<uint64_t>(limits_.max_receive) : kLargestMessage;
  std::string plain;
  // As gRPC fails such a call: too large is RESOURCE_EXHAUSTED, undecodable INTERNAL.
  switch (rpc::Decompress(ToEncoding(recv_algorithm_), FlattenByteBuffer(*message), cap, &plain, why)) {
    case rpc::InflateResult::kOk:
      break;
    case rpc::InflateResult::kTooLarge:
      return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case rpc::InflateResult::kCorrupt:
      return GRPC_STATUS_INTERNAL;
  }
  Real().grpc_byte_buffer_destroy(*message);
  *message = NewByteBuffer(plain);
  return GRPC_STATUS_OK;
}

Status ManagedCall::Place(const grpc_byte_buffer* message, grpc_byte_buffer* compressed, PlacedMessage* placed) {
  Status st = conn_->PlaceMessage(compressed != nullptr ? compressed : message, placed);
  if (st.ok() && compressed != nullptr) placed->wire.flags = rpc::kMessageCompressed;
  return st;
}

// ---------------------------------------------------------------- batches

grpc_call_error ManagedCall::Validate(const grpc_op* ops, size_t nops) {
  uint32_t seen = 0;
  for (size_t i = 0; i < nops; ++i) {
    const grpc_op& op = ops[i];
    if (op.reserved != nullptr) return GRPC_CALL_ERROR;
    uint32_t bit = 1u << op.op;
    if (op.op > GRPC_OP_RECV_CLOSE_ON_SERVER) return GRPC_CALL_ERROR;
    if (seen & bit) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
    seen |= bit;
    switch (op.op) {
      case GRPC_OP_SEND_INITIAL_METADATA:
        if (sent_initial_) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        if (!MetadataIsValid(op.data.send_initial_metadata.metadata, op.data.send_initial_metadata.count)) {
          return GRPC_CALL_ERROR_INVALID_METADATA;
        }
        break;
      case GRPC_OP_SEND_MESSAGE:
        if (op.data.send_message.send_message == nullptr) return GRPC_CALL_ERROR_INVALID_MESSAGE;
        if ((op.flags & ~uint32_t{GRPC_WRITE_USED_MASK}) != 0) return GRPC_CALL_ERROR_INVALID_FLAGS;
        if (!held_.empty() && held_.back().message != nullptr) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        if (sent_close_) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        break;
      case GRPC_OP_SEND_CLOSE_FROM_CLIENT:
        if (!client_) return GRPC_CALL_ERROR_NOT_ON_SERVER;
        if (sent_close_) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        break;
      case GRPC_OP_SEND_STATUS_FROM_SERVER:
        if (client_) return GRPC_CALL_ERROR_NOT_ON_CLIENT;
        if (sent_close_) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        if (!MetadataIsValid(op.data.send_status_from_server.trailing_metadata,
                             op.data.send_status_from_server.trailing_metadata_count)) {
          return GRPC_CALL_ERROR_INVALID_METADATA;
        }
        break;
      case GRPC_OP_RECV_INITIAL_METADATA:
        if (!client_) return GRPC_CALL_ERROR_NOT_ON_SERVER;
        if (recv_initial_.batch != nullptr) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        break;
      case GRPC_OP_RECV_MESSAGE:
        if (recv_message_.batch != nullptr) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        break;
      case GRPC_OP_RECV_STATUS_ON_CLIENT:
        if (!client_) return GRPC_CALL_ERROR_NOT_ON_SERVER;
        if (recv_status_.batch != nullptr) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        break;
      case GRPC_OP_RECV_CLOSE_ON_SERVER:
        if (client_) return GRPC_CALL_ERROR_NOT_ON_CLIENT;
        if (recv_close_.batch != nullptr) return GRPC_CALL_ERROR_TOO_MANY_OPERATIONS;
        break;
    }
  }
  return GRPC_CALL_OK;
}


// ---------------------------------------------------------------- events

void ManagedCall::OnEvent(const rpc::CallEvent& ev, grpc_byte_buffer* message) {
  Ready ready;
  Deferred d;
  grpc_byte_buffer* drop = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (client_ && ev.has(rpc::kHeaders) && !headers_received_ && !finished_) {
      headers_received_ = true;
      std::string visible;
      headers_count_ = TakeCompressionMetadata(ev.headers, &visible);
      headers_ = Keep(visible);
      if (recv_initial_.batch != nullptr) {
        Batch* b = recv_initial_.batch;
        FillMetadata(recv_initial_.metadata, headers_, headers_count_);
        recv_initial_ = {};
        OpDone(b, true, &ready);
      }
    }
    if (message != nullptr) {
      size_t len = ByteBufferLength(message);
      grpc_status_code bad = GRPC_STATUS_OK;
      std::string why;
      if (finished_ || (!client_ && end_of_messages_)) {
        drop = message;
      } else if (limits_.max_receive >= 0 && static_cast<int64_t>(len) > limits_.max_receive) {
        drop = message;
        std::string why = "Received message larger than max (" + std::to_string(len) + " vs. " +
                          std::to_string(limits_.max_receive) + ")";
        QueueCancel(GRPC_STATUS_RESOURCE_EXHAUSTED, why);
        if (client_) {
          FinishClient(GRPC_STATUS_RESOURCE_EXHAUSTED, why, {}, 0, &ready);
        } else {
          FinishServer(true, &ready);
        }
      } else if ((ev.message.flags & rpc::kMessageCompressed) != 0 &&
                 (bad = Inflate(&message, &why)) != GRPC_STATUS_OK) {
        drop = message;
        QueueCancel(bad, why);
        if (client_) {
          FinishClient(bad, why, {}, 0, &ready);
        } else {
          FinishServer(true, &ready);
        }
      } else {
        received_message_ = true;
        uint32_t flags = (ev.message.flags & rpc::kMessageCompressed) != 0 ? kWasCompressedFlags : 0;
        messages_.push_back(Incoming{message, len, flags});
        if (recv_message_.batch != nullptr) {
          Batch* b = recv_message_.batch;
          DeliverMessage(recv_message_.message, &ready);
          recv_message_ = {};
          OpDone(b, true, &ready);
        }
      }
    }
    if (!client_ && ev.has(rpc::kHalfClose) && !end_of_messages_) {
      end_of_messages_ = true;
      if (recv_message_.batch != nullptr) {
        Batch* b = recv_message_.batch;
        *recv_message_.message = nullptr;
        recv_message_ = {};
        OpDone(b, true, &ready);
      }
    }
    if (client_ && ev.has(rpc::kStatus)) {
      FinishClient(static_cast<grpc_status_code>(ev.status_code), std::string(ev.status_details), ev.trailers.block,
                   ev.trailers.count, &ready);
    }
    if (ev.has(rpc::kCancel)) {
      if (client_) {
        FinishClient(static_cast<grpc_status_code>(ev.cancel_code), std::string(ev.cancel_details), {}, 0, &ready);
      } else {
        FinishServer(true, &ready);
      }
    }
    if (ev.has(rpc::kWindow)) {
      unacked_ -= std::min(unacked_, ev.window);
      if (!finished_) SendHeld(&ready);
    }
    d = TakeDeferred();
  }
  if (drop != nullptr) Real().grpc_byte_buffer_destroy(drop);
  RunDeferred(d);
  PostReady(&ready);
}


template <typename Body>
void ManagedCall::Locked(Body body) {
  Ready ready;
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    body(&ready);
    d = TakeDeferred();
  }
  RunDeferred(d);
  PostReady(&ready);
}

void ManagedCall::EndNow(grpc_status_code code, const std::string& details, bool tell_peer, Ready* ready) {
  if (finished_) return;
  if (tell_peer) QueueCancel(code, details);
  if (client_) {
    FinishClient(code, details, {}, 0, ready);
  } else {
    FinishServer(true, ready);
  }
}

void ManagedCall::OnConnectionLost(const std::string& why) {
  Locked([&](Ready* ready) {
    registered_ = false;  // the connection dropped its routing table
    EndNow(GRPC_STATUS_UNAVAILABLE, "conduit: lost contact with conduitd: " + why, /*tell_peer=*/false, ready);
  });
}

void ManagedCall::OnDeadline() {
  Locked([&](Ready* ready) {
    timer_ = 0;
    EndNow(GRPC_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded", /*tell_peer=*/true, ready);
  });
}

grpc_call_error ManagedCall::Cancel(grpc_status_code code, const char* details) {
  Locked([&](Ready* ready) {
    if (client_ || bound_) EndNow(code, details != nullptr ? details : "Cancelled", /*tell_peer=*/true, ready);
  });
  return GRPC_CALL_OK;
}

grpc_call_error ManagedCall::SetCredentials(grpc_call_credentials* creds) {
  if (!client_) return GRPC_CALL_ERROR_NOT_ON_SERVER;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sent_initial_ || finished_) return GRPC_CALL_OK;  // too late to matter, as in gRPC
  }
  // A plugin answering later is waited for within the call's deadline and the daemon's bound.
  int64_t wait_ms = conn_->timeout_ms();
  int64_t until_deadline_us = MicrosUntil(deadline_);
  if (until_deadline_us != rpc::kNoTimeout) wait_ms = std::min<int64_t>(wait_ms, until_deadline_us / 1000);
  CredentialsResult r = ApplyCallCredentials(creds, method_, authority_, channel_->tls(), static_cast<int>(wait_ms));
  if (r.code != GRPC_STATUS_OK) return Cancel(r.code, r.details.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  credentials_md_ = std::move(r.metadata);
  return GRPC_CALL_OK;
}

void ManagedCall::Reject(grpc_status_code code, const char* details) {
  Locked([&](Ready* ready) { EndNow(code, details, /*tell_peer=*/true, ready); });
}

bool ManagedCall::PayloadKnown() {
  std::lock_guard<std::mutex> lock(mu_);
  return !messages_.empty() || end_of_messages_ || finished_;
}

void ManagedCall::BindToProgram(grpc_completion_queue* cq, grpc_metadata_array* initial_metadata,
                                gpr_timespec* deadline, grpc_byte_buffer** payload, grpc_call_details* details) {
  const RealGrpc& g = Real();
  std::lock_guard<std::mutex> lock(mu_);
  bound_ = true;
  cq_ = cq;
  app_refs_ = 1;
  Ref();  // the program's
  if (initial_md_count_ > 0) {
    const std::string* kept = Keep(initial_md_);
    FillMetadata(initial_metadata, kept, initial_md_count_);
  }
  if (deadline != nullptr) *deadline = deadline_;
  if (payload != nullptr) {
    *payload = nullptr;
    if (!messages_.empty()) {
      Ready unused;
      DeliverMessage(payload, &unused);
    }
  }
  if (details != nullptr) {
    details->method = g.grpc_slice_from_copied_buffer(method_.data(), method_.size());
    details->host = g.grpc_slice_from_copied_buffer(authority_.data(), authority_.size());
    details->deadline = deadline_;
  }
}

}  // namespace conduit::grpcshim
