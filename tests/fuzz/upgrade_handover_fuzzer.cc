// What each side of a live upgrade's handover reads from the other (protocol/
// upgrade_protocol.h), through the daemon's own code. The first byte picks the side, the
// rest is the byte stream that side receives:
//   0  the new daemon: ReceiveTakeOver, which reads Refuse, Listener, Descriptor and State
//      messages (no descriptors arrive here, so every Listener and Descriptor must fail)
//   1  the old daemon: frames as it reads them off the socketpair, through ParseHello and
//      ParseAnswer (the new daemon's Hello, and its Ready or Failed)
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/frame.h"
#include "fuzz_check.h"
#include "protocol/upgrade_protocol.h"
#include "upgrade/handover.h"

using namespace conduit;

namespace {

// A connection from which `data` can be read, then end of stream, and to which the side
// under test may still write (its Hello, its Ready): the writing end stays open.
struct Pipe {
  int mine = -1;
  int theirs = -1;
  Pipe(const uint8_t* data, size_t size) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return;
    mine = fds[0];
    theirs = fds[1];
    if (size > 0 && write(theirs, data, size) != static_cast<ssize_t>(size)) {
      close(mine);
      mine = -1;
    }
    shutdown(theirs, SHUT_WR);
  }
  ~Pipe() {
    if (mine >= 0) close(mine);
    if (theirs >= 0) close(theirs);
  }
};

void NewDaemon(const uint8_t* data, size_t size) {
  Pipe pipe(data, size);
  if (pipe.mine < 0) return;
  upgrade::TakeOver takeover;
  Status st = upgrade::ReceiveTakeOver(pipe.mine, "fuzz", 1000, &takeover);
  if (!st.ok()) {
    FUZZ_CHECK(st.code() != ncclSuccess, "a failure with code 0");
    return;
  }
  // Only a State ends the exchange well; without descriptors no Listener or Descriptor
  // message can have been taken.
  FUZZ_CHECK(takeover.listeners.empty() && takeover.descriptors.empty(), "%zu listeners and %zu descriptors without descriptors",
             takeover.listeners.size(), takeover.descriptors.size());
  FUZZ_CHECK(takeover.state.state_version() >= upgrade::MinReadableStateVersion() &&
                 takeover.state.state_version() <= upgrade::StateVersion(),
             "state version %u accepted", takeover.state.state_version());
}

void OldDaemon(const uint8_t* data, size_t size) {
  Pipe pipe(data, size);
  if (pipe.mine < 0) return;
  for (int i = 0; i < 8; ++i) {
    Frame frame;
    if (!ReadFrame(pipe.mine, upgradeproto::kMagic, upgradeproto::kVersion, sizeof(WireStatus) + sizeof(upgradeproto::Hello),
                   &frame, Deadline::AfterMs(1000))
             .ok()) {
      return;
    }
    upgradeproto::Hello hello;
    if (upgrade::ParseHello(frame, &hello).ok()) {
      FUZZ_CHECK(frame.header.type == upgradeproto::kHello, "a Hello of type %u", frame.header.type);
      FUZZ_CHECK(hello.min_state_version <= hello.max_state_version, "versions %u..%u", hello.min_state_version,
                 hello.max_state_version);
      FUZZ_CHECK(FromCString(hello.release).size() < sizeof(hello.release), "an unterminated release");
    }
    Status answer = upgrade::ParseAnswer(frame);
    FUZZ_CHECK(!answer.ok() || (frame.header.type == upgradeproto::kReady && frame.payload.empty()),
               "type %u with %zu bytes taken for Ready", frame.header.type, frame.payload.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = [] {
    signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)init;
  // The socket buffer holds what one call reads; more would block the writer.
  if (size < 1 || size > 64 * 1024) return 0;
  if (data[0] % 2 == 0) {
    NewDaemon(data + 1, size - 1);
  } else {
    OldDaemon(data + 1, size - 1);
  }
  return 0;
}
