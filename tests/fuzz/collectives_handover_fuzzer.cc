// The collectives service's state as a new daemon takes it over from the old one in a live
// upgrade (protocol/upgrade_state.proto: CollectivesState; CollectiveService::AdoptShared,
// Communicator::FromHandover): communicators with their links' sockets and the messages
// waiting for a receive. The input is that state's bytes; eight sockets (and one pipe,
// which is not a socket) stand for the descriptors handed with it. Whatever it holds, the
// new daemon must refuse it with an error, or adopt communicators that pass every check:
// this daemon among their hosts, its ranks local, each taken once by its session.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "fuzz_check.h"
#include "server/program_policy.h"
#include "session/collective_service.h"

using namespace conduit;

namespace {

constexpr char kMyAddr[] = "10.0.0.1:29611";
constexpr int kSockets = 8;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ProgramPolicy policy({}, 1 << 20);
  std::vector<int> others;
  HandedShared in;
  in.service = ServiceId::kCollectives;
  in.state.assign(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < kSockets; ++i) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
    in.fds.emplace_back(sv[0]);
    others.push_back(sv[1]);
  }
  int pipe_fds[2];
  if (pipe(pipe_fds) == 0) {
    in.fds.emplace_back(pipe_fds[0]);
    others.push_back(pipe_fds[1]);
  }
  {
    CommOptions options;
    options.timeout_ms = 1000;
    CommRegistry registry(kMyAddr, options);
    CollectiveService service(&registry, &policy);
    Status st = service.AdoptShared(std::move(in));
    if (!st.ok()) {
      FUZZ_CHECK(st.code() != ncclSuccess, "a refusal with code 0");
      FUZZ_CHECK(registry.List().empty(), "%zu communicators kept after a refusal", registry.List().size());
    } else {
      service.StartShared();
      for (const auto& comm : registry.List()) {
        const Membership& m = comm->membership();
        FUZZ_CHECK(m.my_host >= 0 && static_cast<size_t>(m.my_host) < m.host_addrs.size() &&
                       m.host_addrs[m.my_host] == kMyAddr,
                   "adopted a communicator this daemon is not a host of");
        FUZZ_CHECK(!comm->local_ranks().empty(), "adopted a communicator without local ranks");
        for (int r : comm->local_ranks()) {
          FUZZ_CHECK(r >= 0 && r < comm->nranks() && m.host_of_rank[r] == m.my_host, "local rank %d is not local", r);
          FUZZ_CHECK(registry.TakeHandedOver(comm->key(), r) != nullptr, "local rank %d could not be taken", r);
          FUZZ_CHECK(registry.TakeHandedOver(comm->key(), r) == nullptr, "local rank %d taken twice", r);
        }
      }
    }
  }
  for (int fd : others) close(fd);
  return 0;
}
