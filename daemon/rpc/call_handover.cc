#include "rpc/call_handover.h"

#include <chrono>
#include <vector>

#include "common/log.h"
#include "protocol/rpc_protocol.h"
#include "protocol/upgrade_state.pb.h"
#include "rpc/policy/engine.h"

namespace conduit::rpc {
namespace {

// A call older than this cannot be one that started in the process being replaced.
constexpr uint64_t kMaxAgeUs = 366ull * 24 * 3600 * 1000000;

}  // namespace

Status ExportCall(RpcCall& call, uint64_t id, bool client_end, upgrade::v1::RpcCallState* out) {
  std::lock_guard<std::mutex> lock(call.mu);
  if (call.held) {
    return Status(StatusCode::kAborted, "an RPC call of " + call.info.program + " waits on a rate limit's delay");
  }
  out->set_key(reinterpret_cast<uintptr_t>(&call));
  out->set_id(id);
  out->set_client_end(client_end);
  out->set_method(call.info.method);
  out->set_program(call.info.program);
  out->set_side(static_cast<uint32_t>(call.info.side));
  out->set_request_encoding(static_cast<uint32_t>(call.request_encoding));
  out->set_start_forwarded(call.start_forwarded);
  auto age = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - call.started);
  out->set_age_us(static_cast<uint64_t>(std::max<int64_t>(0, age.count())));
  out->set_request_bytes(call.outcome.request_bytes);
  out->set_request_messages(call.outcome.request_messages);
  out->set_response_bytes(call.outcome.response_bytes);
  out->set_response_messages(call.outcome.response_messages);
  return Status::Ok();
}

Status AdoptedCalls::Attach(const upgrade::v1::RpcCallState& state, std::shared_ptr<Endpoint> end,
                            std::shared_ptr<RpcCall>* out) {
  if (state.key() == 0 || state.method().empty() || state.method().size() > rpcproto::kMaxCallSectionsBytes ||
      state.program().size() > 4096 || state.side() > static_cast<uint32_t>(Side::kServer) ||
      state.request_encoding() > static_cast<uint32_t>(Encoding::kGzip) || state.age_us() > kMaxAgeUs) {
    return InvalidArgument("a handed-over RPC call state is malformed");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) {
    return Status(StatusCode::kDeadlineExceeded,
                  "a handed-over RPC call's end came back after the calls were joined; the call has ended");
  }
  std::shared_ptr<RpcCall>& call = calls_[state.key()];
  if (call == nullptr) {
    call = std::make_shared<RpcCall>();
    call->info.method = state.method();
    call->info.program = state.program();
    call->info.side = static_cast<Side>(state.side());
    call->request_encoding = static_cast<Encoding>(state.request_encoding());
    call->start_forwarded = state.start_forwarded();
    call->started = std::chrono::steady_clock::now() - std::chrono::microseconds(state.age_us());
    call->outcome.request_bytes = state.request_bytes();
    call->outcome.request_messages = state.request_messages();
    call->outcome.response_bytes = state.response_bytes();
    call->outcome.response_messages = state.response_messages();
  } else if (call->info.method != state.method()) {
    return InvalidArgument("the two ends of handed-over RPC call %llu name different methods",
                           static_cast<unsigned long long>(state.key()));
  }
  std::shared_ptr<Endpoint>& slot = state.client_end() ? call->client_end : call->server_end;
  if (slot != nullptr) {
    return InvalidArgument("handed-over RPC call %llu has two %s ends", static_cast<unsigned long long>(state.key()),
                           state.client_end() ? "client" : "server");
  }
  slot = std::move(end);
  (state.client_end() ? call->client_id : call->server_id) = state.id();
  *out = call;
  return Status::Ok();
}

size_t AdoptedCalls::Finish(PolicyEngine* policies) {
  std::map<uint64_t, std::shared_ptr<RpcCall>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls.swap(calls_);
    finished_ = true;
  }
  size_t going_on = 0;
  for (auto& [key, call] : calls) {
    call->filters = policies->FiltersFor(call->info);
    for (const auto& f : call->filters) call->reads_body = call->reads_body || f->ReadsRequestBody();
    if (call->client_end != nullptr && call->server_end != nullptr) {
      ++going_on;
      continue;
    }
    // One end did not come back (its session or link was refused): the other hears what
    // it would of a broken link, and forgets the call.
    const std::string why = "conduit: the other end of this call did not survive the daemon's upgrade";
    CLOG_WARN("upgrade: RPC call %s of %s lost its %s end; ending it", call->info.method.c_str(),
              call->info.program.c_str(), call->client_end == nullptr ? "client" : "server");
    {
      std::lock_guard<std::mutex> lock(call->mu);
      call->finished = true;
    }
    if (call->client_end != nullptr) {
      call->client_end->Deliver(*call, call->client_id, StatusEvent(GrpcStatusOf(StatusCode::kUnavailable), why));
      call->client_end->Forget(call->client_id);
    }
    if (call->server_end != nullptr) {
      if (call->start_forwarded) {
        call->server_end->Deliver(*call, call->server_id, CancelEvent(GrpcStatusOf(StatusCode::kCancelled), why));
      }
      call->server_end->Forget(call->server_id);
    }
  }
  return going_on;
}

}  // namespace conduit::rpc
