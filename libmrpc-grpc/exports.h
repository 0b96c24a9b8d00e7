// Shared by the interposed entry points (exports_*.cc): what makes a symbol visible to the
// dynamic linker.
#ifndef CONDUIT_LIBMRPC_GRPC_EXPORTS_H_
#define CONDUIT_LIBMRPC_GRPC_EXPORTS_H_

#define CONDUIT_EXPORT __attribute__((visibility("default")))

#endif  // CONDUIT_LIBMRPC_GRPC_EXPORTS_H_
