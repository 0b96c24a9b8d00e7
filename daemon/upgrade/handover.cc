#include "upgrade/handover.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/frame.h"
#include "common/log.h"

extern char** environ;

namespace conduit::upgrade {
namespace {

using namespace upgradeproto;

// How long a refused or failed new daemon gets to exit on its own before it is killed.
constexpr int kExitGraceMs = 5000;
// How long the accept loops get to park (each is at most handing one connection over).
constexpr int kParkMs = 5000;

Status Spawn(const HandOverRequest& request, int child_end, pid_t* pid) {
  std::vector<std::string> args{request.binary};
  args.insert(args.end(), request.args.begin(), request.args.end());
  args.push_back("--take-over-fd=" + std::to_string(kTakeOverFd));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_end, kTakeOverFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // This daemon blocks its stop signals in every thread (the main thread takes them with
  // sigwait); the new one sets up its own, from a clean mask.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  const int rc = posix_spawn(pid, request.binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return SystemError("cannot start %s: %s", request.binary.c_str(), strerror(rc));
  return Status::Ok();
}

// How a child ended, for messages.
std::string DescribeExit(int wstatus) {
  if (WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) return std::string("was killed by ") + strsignal(WTERMSIG(wstatus));
  return "ended";
}

// Waits up to grace_ms for the child to exit, then kills it; always reaps it.
std::string Reap(pid_t pid, int grace_ms) {
  int wstatus = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (;;) {
    const pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) return DescribeExit(wstatus);
    if (r < 0) return "could not be waited for";
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  if (waitpid(pid, &wstatus, 0) == pid) return "did not exit and was killed";
  return "could not be waited for";
}

void SendStatus(int fd, uint16_t type, const Status& st) {
  WireStatus wire = ToWire(st);
  (void)WriteFrame(fd, kMagic, kVersion, type, 0, &wire, sizeof(wire), Deadline::AfterMs(1000));
}

// A Refuse or Failed frame's status.
Status StatusOf(const Frame& frame) {
  if (frame.payload.size() != sizeof(WireStatus)) return InternalError("a malformed status");
  WireStatus wire;
  memcpy(&wire, frame.payload.data(), sizeof(wire));
  return FromWire(wire);
}

// The snapshot, sent; then the new daemon's answer.
Status Send(int fd, const HandOverHooks& hooks, v1::DaemonState& state, const std::vector<UniqueFd>& descriptors,
            Deadline deadline) {
  Status st;
  if (descriptors.size() > kMaxDescriptors) {
    st = Status(StatusCode::kResourceExhausted, std::to_string(descriptors.size()) +
                                                    " stored objects and program connections, more than the " +
                                                    std::to_string(kMaxDescriptors) + " one upgrade hands over");
    SendStatus(fd, kRefuse, st);
    return st;
  }
  state.set_state_version(StateVersion());
  for (const auto& [role, listener] : hooks.listeners) {
    ListenerMsg msg{static_cast<uint32_t>(role), 0};
    CONDUIT_RETURN_IF_ERROR(WriteFrame(fd, kMagic, kVersion, kListener, 0, &msg, sizeof(msg), deadline, listener));
  }
  for (size_t i = 0; i < descriptors.size(); ++i) {
    DescriptorMsg msg{static_cast<uint32_t>(i + 1), 0};
    CONDUIT_RETURN_IF_ERROR(
        WriteFrame(fd, kMagic, kVersion, kDescriptor, 0, &msg, sizeof(msg), deadline, descriptors[i].get()));
  }
  std::string bytes;
  if (!state.SerializeToString(&bytes) || bytes.size() > kMaxStateBytes) {
    st = InternalError("the daemon's state cannot be serialized (%zu bytes)", bytes.size());
    SendStatus(fd, kRefuse, st);
    return st;
  }
  CONDUIT_RETURN_IF_ERROR(
      WriteFrame(fd, kMagic, kVersion, kState, 0, bytes.data(), static_cast<uint32_t>(bytes.size()), deadline));
  Frame reply;
  st = ReadFrame(fd, kMagic, kVersion, sizeof(WireStatus), &reply, deadline);
  if (!st.ok()) return st;
  CONDUIT_RETURN_IF_ERROR(ParseAnswer(reply));
  return WriteFrame(fd, kMagic, kVersion, kGo, 0, nullptr, 0, deadline);
}

// Everything after the new daemon's Hello; the gate is parked on entry and left parked only
// when this returns Ok (what the snapshot stopped is resumed otherwise).
Status Transfer(int fd, const HandOverHooks& hooks, int drain_ms, Deadline deadline) {
  v1::DaemonState state;
  std::vector<UniqueFd> descriptors;
  Status st = hooks.snapshot(drain_ms, &state, &descriptors);
  if (!st.ok()) {
    SendStatus(fd, kRefuse, st);
    return st;
  }
  st = Send(fd, hooks, state, descriptors, deadline);
  if (!st.ok() && hooks.resume) hooks.resume();
  return st;
}

}  // namespace

Status ParseHello(const Frame& frame, Hello* hello) {
  if (frame.header.type != kHello || frame.payload.size() != sizeof(Hello)) {
    return InternalError("it did not open with a Hello");
  }
  memcpy(hello, frame.payload.data(), sizeof(*hello));
  if (memchr(hello->release, 0, sizeof(hello->release)) == nullptr) {
    return InternalError("its Hello's release is not terminated");
  }
  if (hello->min_state_version > hello->max_state_version) {
    return InternalError("its Hello names state versions %u..%u", hello->min_state_version, hello->max_state_version);
  }
  return Status::Ok();
}

Status ParseAnswer(const Frame& frame) {
  if (frame.header.type == kReady && frame.payload.empty()) return Status::Ok();
  if (frame.header.type == kFailed) {
    Status why = StatusOf(frame);
    if (why.ok()) return InternalError("the new conduitd reported a failure without a reason");
    return Status(why.canonical(), "the new conduitd could not take over: " + why.message());
  }
  return InternalError("the new conduitd sent message type %u instead of Ready", frame.header.type);
}

Status HandOver(const HandOverRequest& request, const HandOverHooks& hooks, HandOverOutcome* outcome) {
  if (access(request.binary.c_str(), X_OK) != 0) {
    return InvalidUsage("cannot run %s: %s", request.binary.c_str(), strerror(errno));
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return SystemError("socketpair for the handover: %s", strerror(errno));
  }
  UniqueFd mine(sv[0]);
  UniqueFd theirs(sv[1]);
  if (theirs.get() == kTakeOverFd) theirs.reset(fcntl(sv[1], F_DUPFD_CLOEXEC, kTakeOverFd + 1));
  if (!theirs.valid()) return SystemError("dup for the handover: %s", strerror(errno));
  pid_t pid = -1;
  CONDUIT_RETURN_IF_ERROR(Spawn(request, theirs.get(), &pid));
  theirs.reset();
  outcome->new_pid = pid;
  const Deadline deadline = Deadline::AfterMs(request.timeout_ms);
  CLOG_INFO("upgrade: started %s (pid %d), waiting for it to ask for the daemon's state", request.binary.c_str(), pid);

  Frame hello_frame;
  Hello hello;
  Status st = ReadFrame(mine.get(), kMagic, kVersion, sizeof(Hello), &hello_frame, deadline);
  if (st.ok()) st = ParseHello(hello_frame, &hello);
  if (!st.ok()) {
    const std::string how = Reap(pid, 1000);
    return SystemError("upgrade: the new conduitd (pid %d) %s before taking over: %s", pid, how.c_str(),
                       st.message().c_str());
  }
  outcome->new_release = FromCString(hello.release);
  if (StateVersion() < hello.min_state_version || StateVersion() > hello.max_state_version) {
    st = InvalidUsage("%s reads daemon state versions %u..%u, and this daemon writes version %u: no live "
                      "upgrade between them (upgrade through a release that reads both, or stop and restart)",
                      outcome->new_release.c_str(), hello.min_state_version, hello.max_state_version, StateVersion());
    SendStatus(mine.get(), kRefuse, st);
    Reap(pid, kExitGraceMs);
    return st;
  }

  const auto parked = std::chrono::steady_clock::now();
  if (!hooks.gate->Park(Deadline::AfterMs(kParkMs))) {
    st = Status(StatusCode::kAborted, "the accept loops did not stop within " + std::to_string(kParkMs) +
                                          " ms (a connection being refused or handed to a thread); try again");
    SendStatus(mine.get(), kRefuse, st);
    Reap(pid, kExitGraceMs);
    return st;
  }
  st = Transfer(mine.get(), hooks, request.drain_ms, deadline);
  if (st.ok()) {
    outcome->pause_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - parked).count();
    return st;
  }
  // Nothing moved for good: this daemon accepts again at once (the new one never accepts
  // without a Go), and the new one goes.
  hooks.gate->Resume();
  mine.reset();
  const std::string how = Reap(pid, kExitGraceMs);
  CLOG_WARN("upgrade to %s called off, this daemon goes on serving: %s (the new process %s)",
            outcome->new_release.c_str(), st.message().c_str(), how.c_str());
  return st;
}

Status ReceiveTakeOver(int fd, const std::string& release, int timeout_ms, TakeOver* out) {
  const Deadline deadline = Deadline::AfterMs(timeout_ms);
  Hello hello{};
  hello.min_state_version = MinReadableStateVersion();
  hello.max_state_version = StateVersion();
  CopyCString(hello.release, release.c_str());
  CONDUIT_RETURN_IF_ERROR(WriteFrame(fd, kMagic, kVersion, kHello, 0, &hello, sizeof(hello), deadline));
  for (;;) {
    Frame frame;
    CONDUIT_RETURN_IF_ERROR(ReadFrame(fd, kMagic, kVersion, kMaxStateBytes, &frame, deadline, /*accept_fd=*/true));
    switch (frame.header.type) {
      case kRefuse: {
        Status why = StatusOf(frame);
        return why.ok() ? InternalError("the old daemon refused without a reason") : why;
      }
      case kListener: {
        ListenerMsg msg;
        if (frame.payload.size() != sizeof(msg) || !frame.fd.valid()) {
          return InternalError("a Listener message without its socket");
        }
        memcpy(&msg, frame.payload.data(), sizeof(msg));
        if (msg.role < static_cast<uint32_t>(ListenerRole::kProgram) ||
            msg.role > static_cast<uint32_t>(ListenerRole::kMetrics) ||
            out->listeners.count(static_cast<ListenerRole>(msg.role)) != 0) {
          return InternalError("a Listener message for role %u (unknown, or sent twice)", msg.role);
        }
        out->listeners[static_cast<ListenerRole>(msg.role)] = std::move(frame.fd);
        break;
      }
      case kDescriptor: {
        DescriptorMsg msg;
        if (frame.payload.size() != sizeof(msg) || !frame.fd.valid()) {
          return InternalError("a Descriptor message without its descriptor");
        }
        memcpy(&msg, frame.payload.data(), sizeof(msg));
        if (msg.index != out->descriptors.size() + 1 || msg.index > kMaxDescriptors) {
          return InternalError("Descriptor message %u where %zu was due", msg.index, out->descriptors.size() + 1);
        }
        out->descriptors.push_back(std::move(frame.fd));
        break;
      }
      case kState:
        if (!out->state.ParseFromArray(frame.payload.data(), static_cast<int>(frame.payload.size()))) {
          return InternalError("the daemon state (%zu bytes) does not parse", frame.payload.size());
        }
        if (out->state.state_version() < MinReadableStateVersion() || out->state.state_version() > StateVersion()) {
          return InvalidUsage("the old daemon sent state version %u, not one of %u..%u", out->state.state_version(),
                              MinReadableStateVersion(), StateVersion());
        }
        return Status::Ok();
      default:
        return InternalError("unexpected message type %u from the old daemon", frame.header.type);
    }
  }
}

Status SendReadyAndWaitGo(int fd, int timeout_ms) {
  const Deadline deadline = Deadline::AfterMs(timeout_ms);
  CONDUIT_RETURN_IF_ERROR(WriteFrame(fd, kMagic, kVersion, kReady, 0, nullptr, 0, deadline));
  Frame go;
  Status st = ReadFrame(fd, kMagic, kVersion, 0, &go, deadline);
  if (!st.ok()) return SystemError("the old daemon did not confirm the handover: %s", st.message().c_str());
  if (go.header.type != kGo) return InternalError("the old daemon sent message type %u instead of Go", go.header.type);
  return Status::Ok();
}

void SendFailed(int fd, const Status& why) { SendStatus(fd, kFailed, why); }

}  // namespace conduit::upgrade
