// A program's collectives session as the new daemon takes it over in a live upgrade
// (protocol/upgrade_state.proto: CollectiveSession; ClientSession::Restore): its shared
// segment, host regions, GPU registrations, reply and request pages, asynchronous error and
// communicator. The input is the state's bytes; descriptors 1-3 are sealed 64 KiB memfds (a
// segment, a region or a page), 4 an unsealed memfd, 5 a socket and 6 a pipe. Whatever it
// holds, the new daemon must refuse it with an error, or take it without a communicator
// (none was handed over here): it may not crash, leak into another session's rank, or take
// a descriptor it was not given.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "fuzz_check.h"
#include "server/program_park.h"
#include "server/program_policy.h"
#include "session/client_session.h"
#include "protocol/upgrade_state.pb.h"

using namespace conduit;

namespace {

constexpr char kMyAddr[] = "10.0.0.1:29611";
constexpr off_t kSegment = 64 << 10;

UniqueFd Memfd(bool sealed) {
  UniqueFd fd(memfd_create("fuzz-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ftruncate(fd.get(), kSegment) != 0) return UniqueFd();
  if (sealed) fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ProgramPolicy policy({}, 1 << 20);
  const std::string state(reinterpret_cast<const char*>(data), size);
  std::vector<UniqueFd> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(Memfd(true));
  fds.push_back(Memfd(false));
  int sv[2], pipe_fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  UniqueFd other_end(sv[1]);
  fds.emplace_back(sv[0]);
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return 0;
  UniqueFd pipe_write(pipe_fds[1]);
  fds.emplace_back(pipe_fds[0]);
  for (const UniqueFd& fd : fds) {
    if (!fd.valid()) return 0;
  }

  int program[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, program) != 0) return 0;
  UniqueFd program_end(program[1]);
  CommOptions options;
  options.timeout_ms = 1000;
  CommRegistry registry(kMyAddr, options);
  ProgramPark park(ServiceId::kCollectives);
  ProgramCredentials creds;
  creds.pid = getpid();
  creds.uid = static_cast<int>(getuid());
  creds.gid = static_cast<int>(getgid());
  ClientSession session(UniqueFd(program[0]), &registry, &policy, "fuzz", creds, &park);
  Status st = session.Restore(state, std::move(fds));
  if (!st.ok()) {
    FUZZ_CHECK(st.code() != ncclSuccess, "a refusal with code 0: %s", st.message().c_str());
    return 0;
  }
  upgrade::v1::CollectiveSession parsed;
  FUZZ_CHECK(parsed.ParseFromString(state), "a state that does not parse was taken");
  // Nothing was handed over to this registry: a session that names a communicator must be
  // refused, never attached to one it makes up.
  FUZZ_CHECK(parsed.comm_key() == 0, "rank %d of communicator %llx taken, which nobody handed over", parsed.rank(),
             static_cast<unsigned long long>(parsed.comm_key()));
  // A reply page is written by the daemon at every reply: only a sealed memfd (1-3) may
  // be taken as one, never the unsealed memfd, the socket or the pipe.
  FUZZ_CHECK(parsed.reply_page() <= 3, "descriptor %u taken as a reply page", parsed.reply_page());
  // The same for a request page, which comes only with a reply page.
  FUZZ_CHECK(parsed.request_page() <= 3 && (parsed.request_page() == 0 || parsed.reply_page() != 0),
             "descriptor %u taken as a request page (reply page %u)", parsed.request_page(), parsed.reply_page());
  FUZZ_CHECK(registry.List().empty(), "%zu communicators appeared", registry.List().size());
  FUZZ_CHECK(parsed.shm_size() <= policy.max_shm_bytes(), "a %llu-byte segment mapped past the limit",
             static_cast<unsigned long long>(parsed.shm_size()));
  return 0;
}
