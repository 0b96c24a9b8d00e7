#include "rpc/rpc_context.h"

#include <utility>

namespace conduit::rpc {

RpcContext::RpcContext(RpcOptions options, const ProgramPolicy* admission)
    : options_(std::move(options)), admission_(admission), datapath_(&policies_), links_(this) {}

void RpcContext::SetStopping(const std::string& why) {
  std::lock_guard<std::mutex> lock(stop_mu_);
  stopping_ = why;
}

std::string RpcContext::stopping() const {
  std::lock_guard<std::mutex> lock(stop_mu_);
  return stopping_;
}

}  // namespace conduit::rpc
