// The exported NCCL ABI. Every function is written once, from the API list: the
// profiling name pncclX is the definition and ncclX a weak alias of it (as in NVIDIA's
// library, so a profiler that overrides ncclX can still reach us through pncclX). Each
// call goes to the native library when this process fell back to it, else to
// conduit::managed.
#include "managed.h"

namespace {

template <typename T>
T MissingInNative();
template <>
ncclResult_t MissingInNative<ncclResult_t>() { return ncclInvalidUsage; }
template <>
const char* MissingInNative<const char*>() { return "this function is missing from the native NCCL library"; }
template <>
int MissingInNative<int>() { return -1; }
template <>
ncclTeam_t MissingInNative<ncclTeam_t>() { return ncclTeam_t{0, 0, 0}; }
template <>
void MissingInNative<void>() {}

}  // namespace

#define CONDUIT_EXPORT_(ret, name, params, args)                                            \
  extern "C" __attribute__((visibility("default"))) ret pnccl##name params {                \
    if (const conduit::NativeNccl* native = conduit::NativeFallback()) {                    \
      if (native->name == nullptr) return MissingInNative<ret>();                           \
      return native->name args;                                                             \
    }                                                                                       \
    return conduit::managed::name args;                                                     \
  }                                                                                         \
  extern "C" __attribute__((visibility("default"), weak, alias("pnccl" #name))) ret nccl##name params;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
CONDUIT_NCCL_API_LIST(CONDUIT_EXPORT_)
CONDUIT_NCCL_DEVICE_HOST_API_LIST(CONDUIT_EXPORT_)
#pragma GCC diagnostic pop

// Internal NCCL symbol some tools call; it has no profiling twin.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal(void) {
  if (const conduit::NativeNccl* native = conduit::NativeFallback()) {
    if (native->ResetDebugInitInternal != nullptr) native->ResetDebugInitInternal();
  }
}
