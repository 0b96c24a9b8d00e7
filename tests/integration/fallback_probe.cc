// fallback_probe: a minimal NCCL program for the fallback tests. Linked against the shim;
// when no daemon serves it, the calls it makes must reach the native NCCL, which works
// without a GPU for exactly these three entry points.
#include <cstdio>

#include "nccl.h"

int main() {
  int version = 0;
  ncclResult_t v = ncclGetVersion(&version);
  ncclUniqueId id{};
  ncclResult_t u = ncclGetUniqueId(&id);
  const char* text = ncclGetErrorString(ncclRemoteError);
  std::printf("fallback_probe: ncclGetVersion=%d version=%d\n", static_cast<int>(v), version);
  std::printf("fallback_probe: ncclGetUniqueId=%d\n", static_cast<int>(u));
  std::printf("fallback_probe: ncclGetErrorString(ncclRemoteError)=%s\n", text != nullptr ? text : "(null)");
  return v == ncclSuccess && u == ncclSuccess && text != nullptr ? 0 : 1;
}
