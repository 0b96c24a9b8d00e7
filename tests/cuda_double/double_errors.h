// CUresult values the double returns beyond those Conduit tells apart (cuda/cuda_abi.h),
// and the failures a test can ask it to inject.
#ifndef CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_ERRORS_H_
#define CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_ERRORS_H_

#include "cuda/cuda_abi.h"

namespace cuda_double {

using conduit::cuda::CUresult;

inline constexpr CUresult kErrorOutOfMemory = 2;
inline constexpr CUresult kErrorInvalidDevice = 101;
inline constexpr CUresult kErrorInvalidImage = 200;
inline constexpr CUresult kErrorInvalidContext = 201;
inline constexpr CUresult kErrorInvalidHandle = 400;
inline constexpr CUresult kErrorNotFound = 500;
inline constexpr CUresult kErrorIllegalAddress = 700;
inline constexpr CUresult kErrorNotSupported = 801;

// True when $CONDUIT_CUDA_DOUBLE_FAIL (a comma-separated list of entry points, e.g.
// "cuIpcGetMemHandle,cuIpcOpenEventHandle") names `entry`: that entry point then fails
// with CUDA_ERROR_NOT_SUPPORTED, as a driver that refuses the operation would.
bool Injected(const char* entry);

}  // namespace cuda_double

#endif  // CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_ERRORS_H_
