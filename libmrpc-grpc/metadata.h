// Metadata between gRPC's C structs and the Call frame encoding.
#ifndef CONDUIT_LIBMRPC_GRPC_METADATA_H_
#define CONDUIT_LIBMRPC_GRPC_METADATA_H_

#include <grpc/grpc.h>

#include <string>

#include "common/rpc_event.h"

namespace conduit::grpcshim {

// gRPC's rules: keys are lowercase [a-z0-9-_.] (no pseudo-headers), values of keys not
// ending in "-bin" are printable ASCII.
bool MetadataIsValid(const grpc_metadata* md, size_t count);
// Appends the entries to *block; returns how many.
uint32_t EncodeMetadata(const grpc_metadata* md, size_t count, std::string* block);
// Appends the entries to the program's array (grown with gpr_realloc, as gRPC does). The
// slices point into `md.block`, which must live as long as the call.
void AppendToArray(grpc_metadata_array* array, const rpc::MetadataView& md);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_METADATA_H_
