// The daemon's GPU combine kernels (reduce_kernels.cu): their names and how NVRTC
// compiles them.
#ifndef CONDUIT_DAEMON_GPU_REDUCE_KERNELS_H_
#define CONDUIT_DAEMON_GPU_REDUCE_KERNELS_H_

#include <string>
#include <vector>

#include "common/status.h"
#include "cuda/nvrtc.h"
#include "nccl.h"

namespace conduit::gpu {

// The kernel that combines `type` with `op`: "conduit_combine_<type>_<op>". ncclAvg and
// PreMulSum run as ncclSum (with a divisor or scalars, gpu/combine.h).
std::string CombineKernelName(ncclDataType_t type, ncclRedOp_t op);

// NVRTC options for a GPU of compute capability `cc` (major * 10 + minor): IEEE division,
// denormals kept and no fused multiply-add, so every result equals the host path's.
// `cubin`: machine code for sm_<cc>, else PTX for compute_<cc>.
std::vector<std::string> KernelCompileOptions(int cc, bool cubin = false);

// Compiles every combine kernel (all 12 types x 4 ops) into one PTX module.
Status CompileCombineKernels(const cuda::Nvrtc& nvrtc, int cc, std::string* ptx);
// The same module as machine code for sm_<cc> (what the daemon loads: the driver has
// nothing to compile, so a driver older than NVRTC still loads it).
Status CompileCombineCubin(const cuda::Nvrtc& nvrtc, int cc, std::string* cubin);

}  // namespace conduit::gpu

#endif  // CONDUIT_DAEMON_GPU_REDUCE_KERNELS_H_
