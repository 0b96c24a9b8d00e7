#include "rpc/program_requests.h"

#include <cstring>

namespace conduit::rpc {
namespace {

template <typename T>
bool DecodeExact(std::string_view payload, T* out) {
  if (payload.size() != sizeof(T)) return false;
  memcpy(out, payload.data(), sizeof(T));
  return true;
}

}  // namespace

bool DecodeHello(std::string_view payload, rpcproto::HelloRequest* req, std::string* exe) {
  if (!DecodeExact(payload, req)) return false;
  *exe = FromCString(req->exe);
  return true;
}

bool DecodeOpenChannel(std::string_view payload, rpcproto::OpenChannelRequest* req, std::string* target) {
  if (!DecodeExact(payload, req)) return false;
  *target = FromCString(req->target);
  return true;
}

}  // namespace conduit::rpc
