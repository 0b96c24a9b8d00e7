#include "gpu/reduce_kernels.h"

#include "gpu/kernel_sources.h"
#include "reduce/reduce.h"

namespace conduit::gpu {

std::string CombineKernelName(ncclDataType_t type, ncclRedOp_t op) {
  const char* name = "sum";
  switch (op) {
    case ncclProd: name = "prod"; break;
    case ncclMax: name = "max"; break;
    case ncclMin: name = "min"; break;
    default: break;  // ncclSum, ncclAvg, PreMulSum
  }
  return std::string("conduit_combine_") + DataTypeName(type) + "_" + name;
}

std::vector<std::string> KernelCompileOptions(int cc, bool cubin) {
  return {std::string(cubin ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") + std::to_string(cc), "--std=c++17", "--fmad=false", "--ftz=false",
          "--prec-div=true", "--prec-sqrt=true"};
}

namespace {

std::vector<cuda::Nvrtc::Header> KernelHeaders() {
  std::vector<cuda::Nvrtc::Header> headers;
  for (int i = 1; i < kKernelFileCount; ++i) headers.push_back({kKernelFiles[i].name, kKernelFiles[i].text});
  return headers;
}

}  // namespace

Status CompileCombineKernels(const cuda::Nvrtc& nvrtc, int cc, std::string* ptx) {
  return nvrtc.CompileToPtx(kKernelFiles[0].name, kKernelFiles[0].text, KernelHeaders(), KernelCompileOptions(cc), ptx);
}

Status CompileCombineCubin(const cuda::Nvrtc& nvrtc, int cc, std::string* cubin) {
  return nvrtc.CompileToCubin(kKernelFiles[0].name, kKernelFiles[0].text, KernelHeaders(),
                              KernelCompileOptions(cc, true), cubin);
}

}  // namespace conduit::gpu
