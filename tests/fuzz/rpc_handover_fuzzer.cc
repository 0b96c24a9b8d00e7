// A gRPC program's session as a new daemon takes it over in a live upgrade
// (protocol/upgrade_state.proto: RpcSession; rpc/session_handover.h, ProgramMemory::Import):
// shared segments with the blocks the program holds, channels, served ports, held requests
// bytes read ahead and calls in flight (checked when joined: rpc_link_handover). The input is that state's bytes; six descriptors stand for the ones
// handed with it, by 1-based position: a sealed memfd the size of the control region (1),
// two sealed 1 MiB memfds (2, 3), an unsealed one (4), a socket (5) and a pipe (6). Whatever
// it holds, the state is refused with an error or decoded within the session limits; what
// decodes encodes to the same state again; and the shared memory is mapped only from sealed
// segments, with held blocks inside their segments and never twice.
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/frame_stream.h"
#include "fuzz_check.h"
#include "protocol/rpc_protocol.h"
#include "rpc/program_memory.h"
#include "rpc/session_handover.h"

using namespace conduit;
using namespace conduit::rpc;

namespace {

constexpr SessionLimits kLimits{16, 8, 32, 1 << 20, 64};

int Memfd(uint64_t size, bool sealed) {
  const int fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    return -1;
  }
  if (sealed) fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
  return fd;
}

std::vector<UniqueFd> Descriptors(std::vector<int>* others) {
  std::vector<UniqueFd> fds;
  fds.emplace_back(Memfd(rpcproto::kControlRegionBytes, true));
  fds.emplace_back(Memfd(1 << 20, true));
  fds.emplace_back(Memfd(1 << 20, true));
  fds.emplace_back(Memfd(1 << 20, false));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
    fds.emplace_back(sv[0]);
    others->push_back(sv[1]);
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) == 0) {
    fds.emplace_back(p[0]);
    others->push_back(p[1]);
  }
  return fds;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string state(reinterpret_cast<const char*>(data), size);
  std::vector<int> others;
  HandedSession first;
  Status st = DecodeHandedSession(state, Descriptors(&others), kLimits, &first);
  if (st.ok()) {
    FUZZ_CHECK(first.channels.size() <= kLimits.channels && first.ports.size() <= kLimits.ports &&
                   first.held.size() <= kLimits.held && first.read_ahead.size() <= kLimits.read_ahead &&
                   first.calls.size() <= kLimits.calls,
               "decoded past the session limits");
    for (const HandedSession::Port& p : first.ports) FUZZ_CHECK(p.port >= 1 && p.port <= 65535, "port %u", p.port);
    const size_t channels = first.channels.size(), ports = first.ports.size(), held = first.held.size(),
                 calls = first.calls.size();
    const std::string read_ahead = first.read_ahead;
    // What decodes encodes again, and decodes to the same.
    std::string again;
    std::vector<UniqueFd> fds;
    FUZZ_CHECK(EncodeHandedSession(std::move(first), &again, &fds).ok(), "a decoded state does not encode");
    HandedSession second;
    FUZZ_CHECK(DecodeHandedSession(again, std::move(fds), kLimits, &second).ok(), "an encoded state does not decode");
    FUZZ_CHECK(second.channels.size() == channels && second.ports.size() == ports && second.held.size() == held &&
                   second.read_ahead == read_ahead && second.calls.size() == calls,
               "the state changed through encode and decode");
    // The new daemon's side: the memory is mapped and checked, or refused.
    auto memory = std::make_shared<ProgramMemory>(nullptr, 4 << 20, 4 << 20);
    Status imported = memory->Import(std::move(second.memory));
    if (imported.ok()) FUZZ_CHECK(memory->sends_in_flight() == 0, "sends in flight after an import");
    // The bytes read ahead go back in front of the connection, or are refused.
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
      FrameReader reader(sv[0], 1, 1, 1 << 20, /*accept_fds=*/true);
      const bool fits = read_ahead.size() <= (256u << 10);
      FUZZ_CHECK(reader.Prime(read_ahead, std::move(second.read_ahead_fds)) == fits, "Prime of %zu bytes",
                 read_ahead.size());
      if (fits) FUZZ_CHECK(reader.ReadAhead() == read_ahead, "the primed bytes differ");
      close(sv[0]);
      close(sv[1]);
    }
  }
  for (int fd : others) close(fd);
  return 0;
}
