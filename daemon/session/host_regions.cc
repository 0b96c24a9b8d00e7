#include "session/host_regions.h"

#include "reduce/reduce.h"
#include "session/group_request.h"

namespace conduit {

Status HostRegions::Attach(uint64_t id, UniqueFd fd, uint64_t size) {
  if (id == 0) return InvalidArgument("a host region needs a nonzero id");
  if (!fd.valid()) return InvalidArgument("AttachRegion arrived without a file descriptor");
  if (regions_.count(id) != 0) {
    return InvalidArgument("host region %llu is attached already", static_cast<unsigned long long>(id));
  }
  if (regions_.size() >= kMaxRegions) {
    return InvalidUsage("%zu host regions are attached on this connection already (at most %zu)", regions_.size(),
                        kMaxRegions);
  }
  if (size > max_bytes_ - mapped_bytes_) {
    return InvalidUsage("host region of %llu bytes refused: %llu of this connection's %llu bytes are attached",
                        static_cast<unsigned long long>(size), static_cast<unsigned long long>(mapped_bytes_),
                        static_cast<unsigned long long>(max_bytes_));
  }
  auto region = std::make_unique<Region>();
  CONDUIT_RETURN_IF_ERROR(region->map.Map(fd.get(), size, max_bytes_));
  region->fd = std::move(fd);
  mapped_bytes_ += size;
  regions_[id] = std::move(region);
  return Status::Ok();
}

Status HostRegions::Release(uint64_t id) {
  auto it = regions_.find(id);
  if (it == regions_.end()) return NotFound("host region %llu is not attached", static_cast<unsigned long long>(id));
  mapped_bytes_ -= it->second->map.size();
  regions_.erase(it);
  return Status::Ok();
}

Status HostRegions::Find(uint64_t id, uint64_t offset, uint64_t bytes, const char* what, uint8_t** out) const {
  auto it = regions_.find(id);
  if (it == regions_.end()) {
    return InvalidArgument("the op's %s names host region %llu, which is not attached", what,
                           static_cast<unsigned long long>(id));
  }
  const uint64_t size = it->second->map.size();
  if (offset > size || bytes > size - offset) {
    return InvalidArgument("the op's %s, bytes [%llu, +%llu), lies outside host region %llu of %llu bytes", what,
                           static_cast<unsigned long long>(offset), static_cast<unsigned long long>(bytes),
                           static_cast<unsigned long long>(id), static_cast<unsigned long long>(size));
  }
  *out = it->second->map.data() + offset;
  return Status::Ok();
}

Status HostRegions::Resolve(const std::vector<shimproto::OpDesc>& ops, const std::vector<shimproto::RegionOpRef>& refs,
                            int rank, int nranks, std::vector<HostOpBuffers>* out, int* failed_op) const {
  out->assign(ops.size(), HostOpBuffers{});
  for (size_t i = 0; i < ops.size(); ++i) {
    *failed_op = static_cast<int>(i);
    const shimproto::OpDesc& op = ops[i];
    const shimproto::RegionOpRef& ref = refs[i];
    if (!(op.flags & shimproto::kOpRegion)) {
      if (ref.send_id != 0 || ref.recv_id != 0) return InvalidArgument("op %zu is not in host regions but names some", i);
      continue;
    }
    if (!shimproto::ServedInRegions(op.kind, op.redop)) {
      return InvalidArgument("op %zu: op kind %u with reduction %u is not served on host regions (every "
                             "collective but PreMulSum, Send, Recv)", i, op.kind, op.redop);
    }
    if (!IsValidDataType(op.dtype)) return InvalidArgument("op %zu: invalid ncclDataType_t %u", i, op.dtype);
    uint64_t send_bytes = 0, recv_bytes = 0;
    CONDUIT_RETURN_IF_ERROR(OpBufferBytes(op, nranks, &send_bytes, &recv_bytes));
    if (!shimproto::InputFitsRegions(op.kind, send_bytes)) {
      return InvalidArgument("op %zu: a %s of %llu input bytes in host regions (at most %llu; larger ones are staged)",
                             i, op.kind == shimproto::kReduce ? "Reduce" : "ReduceScatter",
                             static_cast<unsigned long long>(send_bytes),
                             static_cast<unsigned long long>(shimproto::kMaxReduceInRegionsBytes));
    }
    HostOpBuffers& b = (*out)[i];
    uint8_t* p = nullptr;
    if (shimproto::OpNeedsSend(op, rank)) {
      CONDUIT_RETURN_IF_ERROR(Find(ref.send_id, ref.send_offset, send_bytes, "input", &p));
      b.send = p;
    } else if (ref.send_id != 0) {
      return InvalidArgument("op %zu: a receive or a broadcast's non-root names an input", i);
    }
    if (shimproto::OpNeedsRecv(op, rank)) {
      CONDUIT_RETURN_IF_ERROR(Find(ref.recv_id, ref.recv_offset, recv_bytes, "output", &p));
      b.recv = p;
    } else if (ref.recv_id != 0) {
      return InvalidArgument("op %zu: a send or a reduce's non-root names an output", i);
    }
  }
  *failed_op = -1;
  return Status::Ok();
}

bool HostRegions::Holds(const uint8_t* p, uint64_t bytes) const {
  for (const auto& [id, region] : regions_) {
    const uint8_t* base = region->map.data();
    if (p >= base && p <= base + region->map.size() && bytes <= static_cast<uint64_t>(base + region->map.size() - p)) {
      return true;
    }
  }
  return false;
}

void HostRegions::ForEach(const std::function<void(uint64_t id, uint64_t size, int fd)>& fn) const {
  for (const auto& [id, region] : regions_) fn(id, region->map.size(), region->fd.get());
}

}  // namespace conduit
