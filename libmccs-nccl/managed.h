// The managed implementation of every exported function: conduit::managed::Name(...) for
// each ncclName(...). exports.cc routes each call here or to the native library.
#ifndef CONDUIT_LIBMCCS_NCCL_MANAGED_H_
#define CONDUIT_LIBMCCS_NCCL_MANAGED_H_

#include "native_nccl.h"

namespace conduit::managed {

#define CONDUIT_DECLARE_MANAGED_(ret, name, params, args) ret name params;
CONDUIT_NCCL_API_LIST(CONDUIT_DECLARE_MANAGED_)
CONDUIT_NCCL_DEVICE_HOST_API_LIST(CONDUIT_DECLARE_MANAGED_)
#undef CONDUIT_DECLARE_MANAGED_

}  // namespace conduit::managed

namespace conduit {

// Which path this process uses, decided once at the first NCCL call: nullptr means the
// managed path (conduitd accepted us); otherwise the native library to forward to.
const NativeNccl* NativeFallback();

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_MANAGED_H_
