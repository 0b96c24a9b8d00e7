// What the test double can launch (cuModuleLoadData / cuModuleGetFunction / cuLaunchKernel).
//
// Modules are not compiled code here: any image the double's NVRTC produced (or the test
// image below) loads, and functions are found by name among:
//  * conduit_combine_<type>_<op>: the daemon's combine kernels, run on the host through
//    gpu/combine.h, the same text the real kernels are compiled from (CombineArgs passed
//    by value as the single parameter);
//  * test kernels, the "compute" a test program puts on its streams:
//      conduit_double_fill_float32(CUdeviceptr dst, uint64_t count, float first, float step,
//                                  uint32_t delay_ms): after delay_ms, dst[i] = first + step * i
//      conduit_double_spin(uint32_t ms): keeps the stream busy for ms.
#ifndef CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_KERNELS_H_
#define CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_KERNELS_H_

#include "double_streams.h"

namespace cuda_double {

// The text every module image of the double starts with (NUL-terminated).
inline constexpr char kModuleImage[] = "conduit-cuda-double-module";

bool IsModuleImage(const void* image);

struct Function;
// nullptr when no kernel of that name exists.
Function* FindFunction(const char* name);
// Reads the parameters now (as cuLaunchKernel does) and enqueues the kernel on `stream`.
CUresult Launch(const Function& fn, Stream& stream, void** params);

}  // namespace cuda_double

#endif  // CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_KERNELS_H_
