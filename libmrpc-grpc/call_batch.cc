// ManagedCall::StartBatch: a batch of gRPC ops, one handler per op. The sends of a batch
// become one event of the daemon protocol (docs/rpc-protocol.md); each receive completes
// at once from what has arrived or waits on the call until it does.
#include <string>

#include "byte_buffers.h"
#include "call.h"
#include "call_internal.h"
#include "channel.h"
#include "completion.h"
#include "metadata.h"
#include "real_grpc.h"

namespace conduit::grpcshim {

// What one StartBatch builds while its ops are handled: the batch to complete, the event
// its sends make (the metadata and status blocks it points into live here), the message
// placed for it, and the batches that became ready.
struct ManagedCall::BatchWork {
  BatchWork(Batch* b, Ready* r) : batch(b), ready(r) {}
  Batch* batch;
  Ready* ready;
  rpc::CallEvent out;
  std::string md_block, trailers_block, details;
  PlacedMessage placed;
  bool have_message = false;
  bool queued_status = false;
};

grpc_call_error ManagedCall::StartBatch(const grpc_op* ops, size_t nops, void* tag) {
  const grpc_byte_buffer* outgoing = nullptr;
  for (size_t i = 0; i < nops; ++i) {
    if (ops[i].op == GRPC_OP_SEND_MESSAGE) outgoing = ops[i].data.send_message.send_message;
  }
  if (outgoing != nullptr) conn_->ReserveSendSpace(ByteBufferLength(outgoing));

  Ready ready;
  Deferred d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    grpc_call_error err = Validate(ops, nops);
    if (err != GRPC_CALL_OK) return err;
    if (!BeginCompletion(cq_, tag)) return GRPC_CALL_ERROR_COMPLETION_QUEUE_SHUTDOWN;
    Ref();
    BatchWork w(new Batch{tag, cq_, 1, true}, &ready);
    for (size_t i = 0; i < nops; ++i) {
      const grpc_op& op = ops[i];
      switch (op.op) {
        case GRPC_OP_SEND_INITIAL_METADATA: SendInitialMetadata(op, w); break;
        case GRPC_OP_SEND_MESSAGE: SendMessage(op, w); break;
        case GRPC_OP_SEND_CLOSE_FROM_CLIENT: SendCloseFromClient(w); break;
        case GRPC_OP_SEND_STATUS_FROM_SERVER: SendStatusFromServer(op, w); break;
        case GRPC_OP_RECV_INITIAL_METADATA: RecvInitialMetadata(op, w); break;
        case GRPC_OP_RECV_MESSAGE: RecvMessage(op, w); break;
        case GRPC_OP_RECV_STATUS_ON_CLIENT: RecvStatusOnClient(op, w); break;
        case GRPC_OP_RECV_CLOSE_ON_SERVER: RecvCloseOnServer(op, w); break;
      }
    }
    if (w.out.sections != 0 || w.have_message) QueueEvent(w.out, w.have_message ? &w.placed : nullptr);
    if (w.placed.valid) conn_->Unplace(&w.placed);
    if (w.queued_status) FinishServer(false, &ready);
    OpDone(w.batch, true, &ready);
    d = TakeDeferred();
  }
  RunDeferred(d);
  PostReady(&ready);
  return GRPC_CALL_OK;
}

void ManagedCall::SendInitialMetadata(const grpc_op& op, BatchWork& w) {
  uint32_t count = EncodeInitialMetadata(op, &w.md_block);
  sent_initial_ = true;
  if (client_) {
    w.out.sections |= rpc::kStart;
    w.out.target = channel_->id();
    w.out.method = method_;
    w.out.authority = authority_;
    w.out.timeout_us = MicrosUntil(deadline_);
    w.out.initial_md = rpc::MetadataView{count, w.md_block};
  } else if (!finished_) {
    w.out.sections |= rpc::kHeaders;
    w.out.headers = rpc::MetadataView{count, w.md_block};
  }
}

// A message goes in this batch's event, or waits behind earlier held ones (or for the
// daemon to acknowledge enough of what is in flight); one over the send limit ends the call.
void ManagedCall::SendMessage(const grpc_op& op, BatchWork& w) {
  const grpc_byte_buffer* bb = op.data.send_message.send_message;
  size_t len = ByteBufferLength(bb);
  if (finished_) {
    w.batch->ok = false;
  } else if (limits_.max_send >= 0 && static_cast<int64_t>(len) > limits_.max_send) {
    std::string why =
        "Sent message larger than max (" + std::to_string(len) + " vs. " + std::to_string(limits_.max_send) + ")";
    w.batch->ok = false;
    QueueCancel(GRPC_STATUS_RESOURCE_EXHAUSTED, why);
    if (client_) {
      FinishClient(GRPC_STATUS_RESOURCE_EXHAUSTED, why, {}, 0, w.ready);
    } else {
      FinishServer(true, w.ready);
    }
  } else if (!held_.empty() || unacked_ > kWindowBytes * 3 / 4) {
    HeldSend h;
    h.batch = w.batch;
    h.message = bb;
    h.compressed = MaybeCompress(bb, op.flags);
    held_.push_back(std::move(h));
    ++w.batch->pending;
  } else {
    grpc_byte_buffer* compressed = MaybeCompress(bb, op.flags);
    if (Place(bb, compressed, &w.placed).ok()) {
      unacked_ += w.placed.wire.total_length;
      w.have_message = true;
    } else {
      w.batch->ok = false;
    }
    if (compressed != nullptr) Real().grpc_byte_buffer_destroy(compressed);
  }
}

void ManagedCall::SendCloseFromClient(BatchWork& w) {
  sent_close_ = true;
  if (finished_) return;
  if (!held_.empty()) {
    held_.back().extra_sections |= rpc::kHalfClose;
  } else {
    w.out.sections |= rpc::kHalfClose;
  }
}

void ManagedCall::SendStatusFromServer(const grpc_op& op, BatchWork& w) {
  sent_close_ = true;
  if (finished_) {
    w.batch->ok = false;
    return;
  }
  const auto& s = op.data.send_status_from_server;
  uint32_t count = EncodeMetadata(s.trailing_metadata, s.trailing_metadata_count, &w.trailers_block);
  if (s.status_details != nullptr) w.details.assign(SliceView(*s.status_details));
  if (!held_.empty()) {
    HeldSend& h = held_.back();
    h.extra_sections |= rpc::kStatus;
    h.status_code = s.status;
    h.details = w.details;
    h.trailers = w.trailers_block;
    h.trailer_count = count;
  } else {
    w.out.sections |= rpc::kStatus;
    w.out.status_code = s.status;
    w.out.status_details = w.details;
    w.out.trailers = rpc::MetadataView{count, w.trailers_block};
    w.queued_status = true;
  }
}

void ManagedCall::RecvInitialMetadata(const grpc_op& op, BatchWork& w) {
  if (headers_received_ || finished_) {
    FillMetadata(op.data.recv_initial_metadata.recv_initial_metadata, headers_, headers_count_);
  } else {
    recv_initial_ = PendingRecv{w.batch};
    recv_initial_.metadata = op.data.recv_initial_metadata.recv_initial_metadata;
    ++w.batch->pending;
  }
}

void ManagedCall::RecvMessage(const grpc_op& op, BatchWork& w) {
  if (!messages_.empty()) {
    DeliverMessage(op.data.recv_message.recv_message, w.ready);
  } else if (end_of_messages_) {
    *op.data.recv_message.recv_message = nullptr;
    if (cancelled_) w.batch->ok = false;
  } else {
    recv_message_ = PendingRecv{w.batch};
    recv_message_.message = op.data.recv_message.recv_message;
    ++w.batch->pending;
  }
}

void ManagedCall::RecvStatusOnClient(const grpc_op& op, BatchWork& w) {
  const auto& r = op.data.recv_status_on_client;
  PendingRecv want{w.batch};
  want.metadata = r.trailing_metadata;
  want.status = r.status;
  want.details = r.status_details;
  want.error_string = r.error_string;
  if (finished_) {
    FillStatus(want);
  } else {
    recv_status_ = want;
    ++w.batch->pending;
  }
}

void ManagedCall::RecvCloseOnServer(const grpc_op& op, BatchWork& w) {
  if (finished_) {
    *op.data.recv_close_on_server.cancelled = cancelled_ ? 1 : 0;
  } else {
    recv_close_ = PendingRecv{w.batch};
    recv_close_.cancelled = op.data.recv_close_on_server.cancelled;
    ++w.batch->pending;
  }
}

}  // namespace conduit::grpcshim
