// Reading gRPC channel arguments (grpc_channel_args, also a server's), by key and type.
#ifndef CONDUIT_LIBMRPC_GRPC_CHANNEL_ARGS_H_
#define CONDUIT_LIBMRPC_GRPC_CHANNEL_ARGS_H_

#include <grpc/grpc.h>

#include <optional>

namespace conduit::grpcshim {

// The integer argument `key`, if `args` has one of that type.
std::optional<int> IntArg(const grpc_channel_args* args, const char* key);
// The string argument `key`, or nullptr.
const char* StringArg(const grpc_channel_args* args, const char* key);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CHANNEL_ARGS_H_
