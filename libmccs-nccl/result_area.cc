#include "result_area.h"

#include <cstring>

#include "nccl_debug.h"
#include "protocol/shim_protocol.h"

namespace conduit {

void ResultAreaView::Prepare(size_t bytes, DaemonConnection& conn) {
  if (refused_ || bytes == 0) return;
  if (current_ && mapping_ != nullptr && mapping_->size() >= bytes) return;
  shimproto::AttachResultRequest req{bytes};
  Frame reply;
  Status st = conn.Call(shimproto::kAttachResult, &req, sizeof(req), shimproto::kAttachResultReply, &reply);
  shimproto::AttachResultReply head{};
  if (st.ok() && reply.payload.size() != sizeof(head)) {
    st = SystemError("conduitd sent a %zu-byte AttachResult reply", reply.payload.size());
  }
  if (st.ok()) memcpy(&head, reply.payload.data(), sizeof(head));
  if (st.ok() && (!reply.fd.valid() || head.area == 0 || head.size < bytes)) {
    st = SystemError("conduitd's AttachResult reply holds no usable area (%llu bytes, number %llu, %s descriptor)",
                     static_cast<unsigned long long>(head.size), static_cast<unsigned long long>(head.area),
                     reply.fd.valid() ? "with a" : "no");
  }
  auto mapping = std::make_unique<ShmSegment>();
  if (st.ok()) st = mapping->Map(reply.fd.get(), head.size, head.size, /*writable=*/false);
  if (!st.ok()) {
    refused_ = true;
    NCCL_SHIM_INFO(kSubsysShm, "results come through this rank's segment: no result area (%s)", st.message().c_str());
    return;
  }
  mapping_ = std::move(mapping);
  number_ = head.area;
  current_ = true;
}

}  // namespace conduit
