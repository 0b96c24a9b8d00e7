// MessageLimits: the message sizes gRPC allows on a channel or server (its args
// GRPC_ARG_MAX_SEND_MESSAGE_LENGTH / GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, or gRPC's
// defaults), which managed calls enforce as gRPC would.
#ifndef CONDUIT_LIBMRPC_GRPC_MESSAGE_LIMITS_H_
#define CONDUIT_LIBMRPC_GRPC_MESSAGE_LIMITS_H_

#include <cstdint>

namespace conduit::grpcshim {

struct MessageLimits {
  int64_t max_send = -1;  // -1: unlimited
  int64_t max_receive = 4 << 20;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_MESSAGE_LIMITS_H_
