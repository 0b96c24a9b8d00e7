// Service: one part of conduitd (collectives, RPC, objects) plugged into the daemon's two
// sockets. Both wire protocols share one framing (common/frame.h); the high byte of a
// message type names the service that owns it, so the daemon routes a new connection by
// peeking at its first frame header and hands the untouched connection to that service.
#ifndef CONDUIT_DAEMON_SERVER_SERVICE_H_
#define CONDUIT_DAEMON_SERVER_SERVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/conn.h"
#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/peer_identity.h"
#include "common/status.h"

namespace conduit {

// Message type ranges, identical in the shim and the peer protocol (docs/*-protocol.md).
enum class ServiceId : uint8_t {
  kCollectives = 0,  // types 0x0001..0x00ff: the NCCL shim, rendezvous, collective links
  kRpc = 1,          // types 0x0100..0x01ff: the gRPC interposer and RPC datapaths
  kObjects = 2,      // types 0x0200..0x02ff: the object store
};

constexpr ServiceId ServiceOfType(uint16_t type) { return static_cast<ServiceId>(type >> 8); }
constexpr uint16_t FirstTypeOf(ServiceId id) { return static_cast<uint16_t>(static_cast<unsigned>(id) << 8); }

// Who is on the other end of a program connection (SO_PEERCRED), for admission and logs.
struct ProgramCredentials {
  int pid = -1;
  int uid = -1;
  int gid = -1;
};

// A program connection handed to the process that replaces this daemon (a live upgrade,
// docs/upgrade.md): the connection, the session as its service encodes it, and the other
// descriptors the session holds (a shared segment), which its state names by position.
struct HandedProgram {
  ServiceId service = ServiceId::kCollectives;
  UniqueFd fd;
  std::string state;
  std::vector<UniqueFd> fds;
};

// What a service's sessions share, handed over with them (collective communicators and
// their links): the service's own encoding, and the descriptors it names by position.
struct HandedShared {
  ServiceId service = ServiceId::kCollectives;
  std::string state;
  std::vector<UniqueFd> fds;
};

class ProgramPark;

class Service {
 public:
  virtual ~Service() = default;
  virtual const char* name() const = 0;
  // Serves one program connection (shim protocol) until it ends; runs on its own thread.
  // Its first frame is still unread.
  virtual void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) = 0;
  // Serves one connection from another daemon (peer protocol) until it ends; runs on its
  // own thread. The connection is authenticated (`peer` says who proved to be at the other
  // end, security/peer_security.h) and its first frame is still unread. Connections that
  // services cannot take sealed (collective links) never are: the router refuses them.
  virtual void ServePeer(Conn conn, const PeerIdentity& peer) = 0;
  // The daemon is shutting down: fail what is in flight, and whatever programs ask next,
  // with `reason`, and end the service's own loops and the connections it dialed, so that
  // its threads end (conduitd waits for them). Called once, before the router closes the
  // program connections and the connections other daemons opened.
  virtual void Stop(const Status& reason) { (void)reason; }

  // Live upgrade: where this service's program sessions stop between two requests to be
  // handed over (server/program_park.h); null for a service whose sessions do not move, and
  // while one of those serves a program the router refuses the upgrade.
  virtual ProgramPark* program_park() { return nullptr; }
  // While its sessions cannot stop: why, beyond a request under way, for the refusal
  // ("" when nothing else holds them).
  virtual std::string ParkBlockers() { return ""; }
  // Once its sessions are parked: what they share, for the new process. Undone by the
  // park's Resume when the upgrade is called off.
  virtual Status ExportShared(HandedShared* out) {
    (void)out;
    return Status::Ok();
  }
  // In the new process, before it tells the old one it is ready: takes what the old one's
  // ExportShared gave (checked as any input); starts nothing.
  virtual Status AdoptShared(HandedShared in) {
    (void)in;
    return Status::Ok();
  }
  // In the new process, once the old one has stopped for good, before the sessions are
  // adopted: starts what AdoptShared took.
  virtual void StartShared() {}
  // In the new process: serves a handed-over connection from where the old one stopped
  // (on its own thread, as ServeProgram). `state` and `fds` come from the old process and
  // are checked like any input.
  virtual void AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                            std::vector<UniqueFd> fds) {
    (void)fd;
    (void)creds;
    (void)state;
    (void)fds;
  }
  // In the new process, once every handed-over session was given to AdoptProgram and
  // before the accept loops start: returns when those sessions have taken their state
  // (what they serve is known), or at `deadline`.
  virtual void AwaitAdopted(Deadline deadline) { (void)deadline; }
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_SERVICE_H_
