#include "rpc/rpc_context.h"

#include <utility>

namespace conduit::rpc {

RpcContext::RpcContext(RpcOptions options, const ProgramPolicy* admission)
    : options_(std::move(options)), admission_(admission), datapath_(&policies_), links_(this) {}

}  // namespace conduit::rpc
