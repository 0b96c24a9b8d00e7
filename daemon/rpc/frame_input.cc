#include "rpc/frame_input.h"

#include <algorithm>

namespace conduit::rpc {

Status ReadArriving(FrameReader& reader, size_t n, std::string* out, Deadline deadline) {
  out->clear();
  size_t have = 0;
  while (have < n) {
    size_t next = std::min(n, have + std::max(have, kFirstReadStep));
    out->resize(next);
    CONDUIT_RETURN_IF_ERROR(reader.Read(out->data() + have, next - have, deadline));
    have = next;
  }
  return Status::Ok();
}

Status SkipArriving(FrameReader& reader, size_t n, Deadline deadline) {
  char scratch[16 << 10];
  while (n > 0) {
    size_t take = std::min(n, sizeof(scratch));
    CONDUIT_RETURN_IF_ERROR(reader.Read(scratch, take, deadline));
    n -= take;
  }
  return Status::Ok();
}

}  // namespace conduit::rpc
