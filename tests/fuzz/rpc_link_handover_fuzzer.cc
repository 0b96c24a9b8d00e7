// A link to another daemon as a new daemon takes it over in a live upgrade, with its RPC
// calls in flight (protocol/upgrade_state.proto: RpcLinkState; PeerLink::Adopt,
// rpc/call_handover.h). The input is that state's bytes, on a socket pair standing for the
// handed-over connection. Whatever it holds, the link is refused with an error or built
// within the caps: the link version is one this daemon speaks, sealing states and the bytes
// read ahead fit, every call is one such a link can carry and is named once. Joining the
// calls then ends every one (none has its program's end here), and nothing leaks.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_check.h"
#include "protocol/rpc_protocol.h"
#include "protocol/upgrade_state.pb.h"
#include "rpc/peer_link.h"
#include "rpc/rpc_context.h"

using namespace conduit;
using namespace conduit::rpc;

namespace {

// A context per input: joining the calls (Finish) closes its registry for good, as in a
// daemon that took over once.
std::unique_ptr<RpcContext> Context() {
  static ProgramPolicy admission;
  RpcOptions o;
  o.max_link_calls = 64;
  o.max_program_calls = 64;
  return std::make_unique<RpcContext>(o, &admission);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  upgrade::v1::RpcLinkState state;
  if (!state.ParseFromArray(data, static_cast<int>(size))) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return 0;
  std::unique_ptr<RpcContext> context = Context();
  std::shared_ptr<PeerLink> link;
  Status st = PeerLink::Adopt(context.get(), UniqueFd(sv[0]), state, &link);
  if (st.ok()) {
    FUZZ_CHECK(link != nullptr, "adopted without a link");
    FUZZ_CHECK(state.link_version() >= rpcproto::kMinPeerLinkVersion &&
                   state.link_version() <= context->options().max_link_version,
               "link version %u adopted", state.link_version());
    FUZZ_CHECK(static_cast<size_t>(state.calls_size()) <= 128, "%d calls adopted", state.calls_size());
    FUZZ_CHECK(link->accepted() == state.accepted(), "the link's side changed");
  }
  // Every call attached (all of them, or those before a refusal) has only this link's end:
  // each ends here, and its end forgets it.
  const size_t going_on = context->adopted_calls().Finish(&context->policies());
  FUZZ_CHECK(going_on == 0, "%zu calls with both ends from one link", going_on);
  if (st.ok() && state.calls_size() > 0) {
    std::shared_ptr<RpcCall> late;
    FUZZ_CHECK(!context->adopted_calls().Attach(state.calls(0), link, &late).ok(), "an end attached after the join");
  }
  link.reset();
  close(sv[1]);
  return 0;
}
