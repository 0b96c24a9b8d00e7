#include "channel_args.h"

#include <cstring>

namespace conduit::grpcshim {
namespace {

// The last argument named `key` of that type: gRPC reads the list in order, a later entry
// replacing an earlier one.
const grpc_arg* Find(const grpc_channel_args* args, const char* key, grpc_arg_type type) {
  if (args == nullptr) return nullptr;
  const grpc_arg* found = nullptr;
  for (size_t i = 0; i < args->num_args; ++i) {
    const grpc_arg& a = args->args[i];
    if (a.type == type && strcmp(a.key, key) == 0) found = &a;
  }
  return found;
}

}  // namespace

std::optional<int> IntArg(const grpc_channel_args* args, const char* key) {
  const grpc_arg* a = Find(args, key, GRPC_ARG_INTEGER);
  if (a == nullptr) return std::nullopt;
  return a->value.integer;
}

const char* StringArg(const grpc_channel_args* args, const char* key) {
  const grpc_arg* a = Find(args, key, GRPC_ARG_STRING);
  return a == nullptr ? nullptr : a->value.string;
}

}  // namespace conduit::grpcshim
