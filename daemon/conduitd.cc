// conduitd: the per-host Conduit daemon.
//
// Programs on this host reach it through a Unix socket (libnccl.so.2 from libmccs-nccl);
// other hosts' daemons reach it over TCP for rendezvous and collective traffic.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "admin/admin_api.h"
#include "admin/admin_server.h"
#include "admin/daemon_routes.h"
#include "admin/metrics_server.h"
#include "collectives/protocol_versions.h"
#include "objects/peer_versions.h"
#include "collectives/registry.h"
#include "common/busy_poll.h"
#include "common/detached_thread.h"
#include "common/log.h"
#include "common/net_addr.h"
#include "common/thread_guard.h"
#include "common/version.h"
#include "gpu/runtime.h"
#include "objects/object_admin.h"
#include "objects/object_service.h"
#include "policy/fabric.h"
#include "reduce/reduce.h"
#include "rpc/rpc_admin.h"
#include "rpc/rpc_service.h"
#include "security/cluster_key.h"
#include "security/peer_security.h"
#include "server/program_policy.h"
#include "server/service_router.h"
#include "server/unix_socket.h"
#include "session/collective_admin.h"
#include "session/collective_service.h"
#include "session/fabric_admin.h"
#include "settings/daemon_settings.h"
#include "server/systemd_notify.h"
#include "transport/congestion.h"
#include "transport/tcp.h"
#include "upgrade/handover.h"
#include "upgrade/upgrade_admin.h"

namespace conduit {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The command line and the settings at start. Every error ends the daemon with exit
// status 2: a bad command line with the usage, a bad file with its own line; --help prints
// the usage on stdout and exits 0.
[[noreturn]] void Usage(const std::string& msg) {
  fprintf(stderr, "%s\n\n%s", msg.c_str(), DaemonUsage().c_str());
  exit(2);
}

CommandLine ParseArgs(int argc, char** argv) {
  CommandLine cli;
  Status st = ParseCommandLine(argc, argv, &cli);
  if (!st.ok()) Usage(st.message());
  if (cli.help) {
    fputs(DaemonUsage().c_str(), stdout);
    exit(0);
  }
  return cli;
}

DaemonSettings ParseFlags(const CommandLine& cli) {
  DaemonSettings s = DefaultDaemonSettings();
  if (!cli.config.empty()) {
    Status st = ApplyConfigFile(cli.config, s);
    if (!st.ok()) {
      fprintf(stderr, "conduitd: %s\n(conduitd --help and docs/configuration.md describe the settings)\n",
              st.message().c_str());
      exit(2);
    }
  }
  Status st = ApplyCommandLine(cli, s);
  if (st.ok()) st = FinishDaemonSettings(s);
  if (!st.ok()) Usage(st.message());
  return s;
}

// Live upgrade (docs/upgrade.md): how long the new daemon waits for the old one's sockets
// and state, and for its Go after Ready: longer than the longest drain the old one may be
// asked for (upgrade_admin.cc, 120 s). An old daemon that dies closes the socketpair, which
// ends the wait at once.
constexpr int kHandoverReceiveMs = 150000;
constexpr int kHandoverGoMs = 10000;

// The executable this process runs, by the path it was started from: after a package
// upgrade that path holds the new binary, the default of POST /v1/upgrade.
std::string ExecutablePath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "/usr/bin/conduitd";
  std::string path(buf, static_cast<size_t>(n));
  const std::string deleted = " (deleted)";  // the file was replaced since
  if (path.size() > deleted.size() && path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0) {
    path.resize(path.size() - deleted.size());
  }
  return path;
}

// The running services a live upgrade asks about; set once they exist.
struct DaemonParts {
  ServiceRouter* router = nullptr;
  objects::ObjectService* objects = nullptr;
  AdminApi* admin = nullptr;
  AdminServer* admin_server = nullptr;
};
DaemonParts daemon_parts;

// How long the other daemons keep this one's object locations after it handed over.
constexpr int kReplacementGraceMs = 10000;
// At SIGTERM, how long the threads that served connections and loops get to end after the
// connections are shut: an admin request still being read or answered has its own
// deadlines (2 s for its head, 10 s for its body and reply); the rest end at once.
constexpr int kThreadDrainMs = 3000;

Status SnapshotParked(const std::string& my_addr, upgrade::v1::DaemonState* state, std::vector<UniqueFd>* descriptors);

// The state handed to the new daemon, taken with every accept loop parked: program
// sessions stopped between two requests (those of the object store; of collectives, with
// the communicators; of gRPC programs, with their calls in flight and the RPC links that
// carry them: docs/upgrade.md), the stored objects, the operator's changes.
Status SnapshotForUpgrade(const std::string& program_socket, const std::string& admin_socket,
                          const std::string& my_addr, int drain_ms, upgrade::v1::DaemonState* state,
                          std::vector<UniqueFd>* descriptors) {
  const DaemonParts& d = daemon_parts;
  std::vector<HandedProgram> programs;
  std::vector<HandedShared> shared;
  CONDUIT_RETURN_IF_ERROR(d.router->ParkPrograms(Deadline::AfterMs(drain_ms), &programs, &shared));
  Status st = SnapshotParked(my_addr, state, descriptors);
  if (!st.ok()) {
    d.router->ResumePrograms();
    return st;
  }
  state->set_program_socket(program_socket);
  state->set_admin_socket(admin_socket);
  for (HandedProgram& p : programs) {
    descriptors->push_back(std::move(p.fd));
    upgrade::v1::ProgramSession* out = state->add_programs();
    out->set_service(static_cast<uint32_t>(p.service));
    out->set_connection(static_cast<uint32_t>(descriptors->size()));
    out->set_state(std::move(p.state));
    for (UniqueFd& fd : p.fds) {
      descriptors->push_back(std::move(fd));
      out->add_descriptors(static_cast<uint32_t>(descriptors->size()));
    }
  }
  for (HandedShared& s : shared) {
    upgrade::v1::ServiceShared* out = state->add_shared();
    out->set_service(static_cast<uint32_t>(s.service));
    out->set_state(std::move(s.state));
    for (UniqueFd& fd : s.fds) {
      descriptors->push_back(std::move(fd));
      out->add_descriptors(static_cast<uint32_t>(descriptors->size()));
    }
  }
  return Status::Ok();
}

// The rest of the snapshot, once the program sessions are parked.
Status SnapshotParked(const std::string& my_addr, upgrade::v1::DaemonState* state,
                      std::vector<UniqueFd>* descriptors) {
  const DaemonParts& d = daemon_parts;
  // The stored copies, when none is being written (a fetch or a reduce into this store).
  std::vector<objects::HandedCopy> copies;
  const auto quiet = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  Status exported = d.objects->ExportCopies(&copies);
  while (!exported.ok() && std::chrono::steady_clock::now() < quiet) {
    copies.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    exported = d.objects->ExportCopies(&copies);
  }
  if (!exported.ok()) {
    return Status(StatusCode::kAborted, "the object store is busy (" + exported.message() + "); try again");
  }
  // Changes being made now would be missed: wait for every other admin request to end.
  if (!d.admin_server->WaitServing(1, Deadline::AfterMs(5000))) {
    return Status(StatusCode::kAborted, "other admin requests are still being answered; try again");
  }
  state->set_release(kDaemonVersion);
  state->set_advertised_addr(my_addr);
  for (const OperatorDocument& doc : d.admin->ExportState()) {
    upgrade::v1::OperatorDocument* out = state->add_operator_state();
    out->set_method(doc.method);
    out->set_path(doc.path);
    if (!doc.body.is_null()) out->set_body_json(doc.body.Dump());
    if (!doc.state.is_null()) out->set_state_json(doc.state.Dump());
  }
  const objects::TransferStats& transfers = d.objects->transfer_stats();
  state->mutable_object_totals()->set_served(transfers.served.load());
  state->mutable_object_totals()->set_resumed(transfers.resumed.load());
  state->mutable_object_totals()->set_received(transfers.received.load());
  for (objects::HandedCopy& c : copies) {
    upgrade::v1::ObjectCopy* out = state->add_objects();
    out->set_id(c.id);
    out->set_size(c.size);
    out->set_pinned(c.pinned);
    out->set_charged(c.charged);
    out->set_owner_uid(c.owner.uid);
    out->set_owner_gid(c.owner.gid);
    out->set_owner_access(c.owner.access);
    if (c.memfd.valid()) {
      descriptors->push_back(std::move(c.memfd));
      out->set_memfd(static_cast<uint32_t>(descriptors->size()));
    } else {
      out->set_inline_bytes(c.bytes);
    }
  }
  return Status::Ok();
}

// The new daemon's side: the copies the old one handed over, each memfd taken once.
Status AdoptObjects(upgrade::TakeOver& takeover, objects::ObjectService* store) {
  std::vector<objects::HandedCopy> copies;
  for (const upgrade::v1::ObjectCopy& in : takeover.state.objects()) {
    objects::HandedCopy c;
    c.id = in.id();
    c.size = in.size();
    c.pinned = in.pinned();
    c.charged = in.charged();
    c.owner = objproto::Owner{in.owner_uid(), in.owner_gid(), in.owner_access(), 0};
    if (in.memfd() > 0) {
      c.memfd = takeover.Take(in.memfd());
      if (!c.memfd.valid()) {
        return InternalError("object copy %u names memfd %u, of %zu handed over (or one used twice)",
                             static_cast<unsigned>(copies.size()), in.memfd(), takeover.descriptors.size());
      }
    } else {
      c.bytes = in.inline_bytes();
    }
    copies.push_back(std::move(c));
  }
  Status st = store->AdoptCopies(std::move(copies));
  if (!st.ok()) return InternalError("the object store refused a handed-over copy: %s", st.message().c_str());
  // Its transfer counters go on (conduit_objects_transfers_total).
  const upgrade::v1::ObjectTotals& totals = takeover.state.object_totals();
  store->transfer_stats().served += totals.served();
  store->transfer_stats().resumed += totals.resumed();
  store->transfer_stats().received += totals.received();
  return Status::Ok();
}

// The new daemon's side, before Ready: what the old one's services' sessions shared (the
// collective communicators), each descriptor taken once.
Status AdoptShared(upgrade::TakeOver& takeover, ServiceRouter* router) {
  for (const upgrade::v1::ServiceShared& s : takeover.state.shared()) {
    HandedShared in;
    if (s.service() > static_cast<uint32_t>(ServiceId::kObjects)) {
      return InvalidArgument("state handed over for unknown service %u", s.service());
    }
    in.service = static_cast<ServiceId>(s.service());
    in.state = s.state();
    if (!takeover.TakeAll(s.descriptors(), &in.fds)) {
      return InvalidArgument("service %u names descriptors that are not among the %zu handed over (or one twice)",
                             s.service(), takeover.descriptors.size());
    }
    CONDUIT_RETURN_IF_ERROR(router->AdoptShared(std::move(in)));
  }
  return Status::Ok();
}

// The new daemon's side, after the old one's Go: serves each handed-over connection. A
// session that cannot be taken (a malformed entry, a cap) loses its connection, with a log
// line; the others go on. Returns how many were taken.
int AdoptPrograms(upgrade::TakeOver& takeover, ServiceRouter* router) {
  int adopted = 0;
  for (const upgrade::v1::ProgramSession& p : takeover.state.programs()) {
    UniqueFd connection = takeover.Take(p.connection());
    std::vector<UniqueFd> fds;
    const bool all_there = takeover.TakeAll(p.descriptors(), &fds);
    if (!connection.valid() || !all_there || p.service() > static_cast<uint32_t>(ServiceId::kObjects)) {
      CLOG_WARN("upgrade: a handed-over program session names connection %u of service %u, or descriptors, which are "
                "not there",
                p.connection(), p.service());
      continue;
    }
    if (router->AdoptProgram(static_cast<ServiceId>(p.service()), std::move(connection), p.state(), std::move(fds))) {
      ++adopted;
    } else {
      CLOG_WARN("upgrade: a handed-over program connection of service %u could not be served here", p.service());
    }
  }
  return adopted;
}

int Main(int argc, char** argv) {
  const auto started = std::chrono::system_clock::now();
  SetLogTag("conduitd");
  const CommandLine cli = ParseArgs(argc, argv);
  DaemonSettings flags = ParseFlags(cli);
  SetLogLevel(flags.log_level);
  if (flags.busy_poll_us >= 0) SetBusyPollMicros(flags.busy_poll_us);
  if (flags.peer_busy_poll_us >= 0) SetPeerBusyPollMicros(flags.peer_busy_poll_us);
  // Before the peer port and the first connection to another daemon (transport/congestion.h).
  if (Status cc = SetPeerCongestion(flags.peer_congestion); !cc.ok()) {
    CLOG_WARN("%s", cc.message().c_str());
  } else if (!PeerCongestion().empty()) {
    CLOG_INFO("connections to other daemons use TCP congestion control %s (--peer-congestion)", PeerCongestion().c_str());
  }
  // Which compilation of the host reduction loops this CPU runs (reduce/reduce.h).
  CLOG_INFO("reductions on host memory use the %s loops%s", ReduceIsaName(ActiveReduceIsa()),
            getenv("CONDUIT_REDUCE_ISA") != nullptr ? " (CONDUIT_REDUCE_ISA)" : "");
  signal(SIGPIPE, SIG_IGN);
  // The object store keeps one memfd per large object.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  // Only the main thread takes SIGINT/SIGTERM (through sigwait), so shutdown is orderly.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);   // reload the configuration file and the topology
  sigaddset(&stop, SIGUSR2);  // a live upgrade handed over: exit (upgrade_setup.exit)
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  static Fabric fabric(flags.topology);
  fabric.set_flow_policy(flags.flows);
  fabric.set_ring_policy(flags.ring);
  if (!flags.topology.empty()) {
    Status loaded = fabric.topology().Reload();
    if (!loaded.ok()) {
      CLOG_ERROR("%s", loaded.message().c_str());
      return 1;
    }
  }

  // GPUs, if any: probed (and the combine kernels compiled) before programs can arrive, and
  // in a live upgrade before the old daemon parks its accept loops (the slow part of a
  // start does not lengthen the pause); logs whether device buffers are served and, if
  // not, why.
  gpu::Runtime::Get();

  // A live upgrade (docs/upgrade.md): the daemon this one replaces hands over its sockets
  // and the operator's run-time changes. Until this daemon says Ready, every failure must
  // reach the old one, which then goes on serving.
  UniqueFd handover(cli.take_over_fd);
  upgrade::TakeOver takeover;
  if (handover.valid()) {
    Status st = upgrade::ReceiveTakeOver(handover.get(), kDaemonVersion, kHandoverReceiveMs, &takeover);
    if (!st.ok()) {
      CLOG_ERROR("upgrade: cannot take over: %s", st.message().c_str());
      return 1;
    }
    CLOG_INFO("upgrade: taking over from %s (state version %u): %zu sockets, %d operator changes",
              takeover.state.release().c_str(), takeover.state.state_version(), takeover.listeners.size(),
              takeover.state.operator_state_size());
  }
  auto fail = [&handover](const std::string& why) {
    CLOG_ERROR("%s", why.c_str());
    if (handover.valid()) upgrade::SendFailed(handover.get(), InvalidUsage("%s", why.c_str()));
    return 1;
  };
  auto inherited = [&takeover](upgradeproto::ListenerRole role) {
    auto it = takeover.listeners.find(role);
    return it == takeover.listeners.end() ? UniqueFd() : std::move(it->second);
  };
  if (handover.valid()) {
    if (takeover.state.program_socket() != flags.socket_path || takeover.state.admin_socket() != flags.admin_socket) {
      return fail("upgrade: the sockets are " + flags.socket_path + " and " + flags.admin_socket + " here but " +
                  takeover.state.program_socket() + " and " + takeover.state.admin_socket() +
                  " in the running daemon: a live upgrade keeps the sockets; stop and restart to move them");
    }
  }

  UniqueFd peer_listener = inherited(upgradeproto::ListenerRole::kPeer);
  SockAddr bound;
  Status st;
  if (peer_listener.valid()) {
    bound.len = sizeof(bound.storage);
    if (getsockname(peer_listener.get(), reinterpret_cast<sockaddr*>(&bound.storage), &bound.len) != 0) {
      return fail(std::string("upgrade: the peer port handed over: ") + strerror(errno));
    }
  } else {
    st = TcpListen(flags.listen, &peer_listener, &bound);
    if (!st.ok()) return fail(st.message());
    ApplyPeerCongestion(peer_listener.get());  // accepted connections inherit it
  }
  std::string port = FormatSockAddr(bound);
  port = port.substr(port.rfind(':') + 1);
  std::string ip = flags.advertise;
  if (ip.empty()) {
    ip = flags.listen.substr(0, flags.listen.rfind(':'));
    if (ip.empty() || ip == "0.0.0.0" || ip == "[::]") ip = PrimaryIpv4Address();
  }
  std::string my_addr = (ip.find(':') != std::string::npos && ip[0] != '[') ? "[" + ip + "]:" + port : ip + ":" + port;
  if (handover.valid() && takeover.state.advertised_addr() != my_addr) {
    return fail("upgrade: this daemon would be known as " + my_addr + " but the running one is " +
                takeover.state.advertised_addr() + " (--listen/--advertise changed): stop and restart instead");
  }

  UniqueFd admin_listener = inherited(upgradeproto::ListenerRole::kAdmin);
  if (!admin_listener.valid()) {
    st = ListenUnix(flags.admin_socket, flags.admin_mode, &admin_listener);
    if (!st.ok()) return fail("admin socket: " + st.message());
  }
  // Metrics: the old daemon's port when it had one and this one wants one (closed when it
  // does not), else a new one.
  UniqueFd metrics_listener = inherited(upgradeproto::ListenerRole::kMetrics);
  if (flags.metrics_listen.empty()) metrics_listener.reset();
  SockAddr metrics_bound;
  if (metrics_listener.valid()) {
    metrics_bound.len = sizeof(metrics_bound.storage);
    getsockname(metrics_listener.get(), reinterpret_cast<sockaddr*>(&metrics_bound.storage), &metrics_bound.len);
  } else if (!flags.metrics_listen.empty()) {
    st = TcpListen(flags.metrics_listen, &metrics_listener, &metrics_bound);
    if (!st.ok()) return fail("metrics-listen: " + st.message());
  }
  // The program socket listens last: its appearing is what programs, packaging scripts and
  // the tests take for "the daemon is up", so the admin and metrics sockets must already be
  // listening by then (connections wait in the backlog until the accept loops start).
  UniqueFd unix_listener = inherited(upgradeproto::ListenerRole::kProgram);
  if (!unix_listener.valid()) {
    st = ListenUnix(flags.socket_path, 0666, &unix_listener);
    if (!st.ok()) return fail(st.message());
  }

  // How this daemon proves itself to other daemons and checks them (docs/security.md).
  PeerSecurityOptions peer_options;
  peer_options.self = my_addr;
  peer_options.seal = flags.encrypt_peers;
  if (flags.insecure_peers) {
    peer_options.mode = PeerMode::kInsecure;
  } else if (!flags.cluster_key.empty()) {
    peer_options.mode = PeerMode::kClusterKey;
    st = LoadClusterKey(flags.cluster_key, &peer_options.key);
    if (!st.ok()) return fail(st.message());
  }
  static std::unique_ptr<PeerSecurity> security;
  st = PeerSecurity::Create(std::move(peer_options), &security);
  if (!st.ok()) return fail(st.message());
  if (security->mode() == PeerMode::kInsecure) {
    CLOG_WARN("%s", security->Describe().c_str());
  } else {
    CLOG_INFO("%s", security->Describe().c_str());
  }
  flags.comm.security = security.get();
  flags.comm.protocol_versions = CollectiveProtocolVersions();

  // The services live until _exit: their threads are detached and never joined.
  static CommRegistry registry(my_addr, flags.comm, &fabric);
  static ProgramPolicy policy(flags.deny_exe, flags.max_shm_bytes);
  static CollectiveService collectives(&registry, &policy);
  rpc::RpcOptions rpc_options;
  rpc_options.security = security.get();
  rpc_options.my_addr = my_addr;
  rpc_options.peer_port = static_cast<uint32_t>(std::stoul(port));
  rpc_options.timeout_ms = flags.comm.timeout_ms;
  rpc_options.inline_max = flags.rpc_inline_max;
  rpc_options.max_link_assembling_bytes = flags.rpc_link_assembly_bytes;
  rpc_options.max_link_version = flags.rpc_link_version;
  rpc_options.native_listeners = !flags.rpc_managed_only;
  static rpc::RpcService rpc(rpc_options, &policy);
  flags.objects.security = security.get();
  flags.objects.self = my_addr;
  flags.objects.peers = SplitList(flags.object_peers);
  flags.objects.timeout_ms = flags.comm.timeout_ms;
  flags.objects.peer_versions = ObjectPeerVersions();
  static objects::ObjectService object_store(flags.objects, &policy);
  if (handover.valid()) {
    st = AdoptObjects(takeover, &object_store);
    if (!st.ok()) _exit(fail("upgrade: " + st.message()));  // services run threads: no return
  }
  object_store.Start();
  static ServiceRouter router(security.get());
  router.Add(ServiceId::kCollectives, &collectives);
  router.Add(ServiceId::kRpc, &rpc);
  router.Add(ServiceId::kObjects, &object_store);
  if (handover.valid()) {
    st = AdoptShared(takeover, &router);
    if (!st.ok()) _exit(fail("upgrade: " + st.message()));
  }

  static AdminApi admin;
  AddDaemonRoutes(&admin, DaemonInfo{kDaemonVersion, my_addr, flags.socket_path, flags.admin_socket,
                                       ReduceIsaName(ActiveReduceIsa()), started}, &router,
                  &policy);
  AddCollectiveAdmin(&admin, &registry);
  rpc::AddRpcAdmin(&admin, &rpc);
  AddFabricAdmin(&admin, &fabric);
  objects::AddObjectAdmin(&admin, &object_store);
  static AdminServer admin_server(&admin, flags.admin);
  static ListenerGate gate;  // every accept loop: parked during an upgrade, stopped at the end

  // The next upgrade, from this daemon to a new one.
  static std::atomic<bool> handed_over{false};
  upgrade::UpgradeSetup upgrade_setup;
  upgrade_setup.default_binary = ExecutablePath();
  upgrade_setup.args = cli.args;
  upgrade_setup.hooks.gate = &gate;
  upgrade_setup.hooks.listeners = {{upgradeproto::ListenerRole::kProgram, unix_listener.get()},
                                   {upgradeproto::ListenerRole::kPeer, peer_listener.get()},
                                   {upgradeproto::ListenerRole::kAdmin, admin_listener.get()}};
  if (metrics_listener.valid()) {
    upgrade_setup.hooks.listeners.emplace_back(upgradeproto::ListenerRole::kMetrics, metrics_listener.get());
  }
  upgrade_setup.hooks.snapshot = [&flags, my_addr](int drain_ms, upgrade::v1::DaemonState* state,
                                                    std::vector<UniqueFd>* descriptors) {
    return SnapshotForUpgrade(flags.socket_path, flags.admin_socket, my_addr, drain_ms, state, descriptors);
  };
  upgrade_setup.hooks.resume = [] { daemon_parts.router->ResumePrograms(); };
  upgrade_setup.exit = [] {
    handed_over.store(true);
    kill(getpid(), SIGUSR2);  // the main thread exits once the reply is written
  };
  upgrade::AddUpgradeAdmin(&admin, std::move(upgrade_setup));
  daemon_parts = DaemonParts{&router, &object_store, &admin, &admin_server};

  if (handover.valid()) {
    // From here on the services run threads that are never joined: _exit, not return.
    st = upgrade::ReplayOperatorState(admin, takeover.state);
    if (!st.ok()) _exit(fail("upgrade: " + st.message()));
    st = upgrade::SendReadyAndWaitGo(handover.get(), kHandoverGoMs);
    if (!st.ok()) {
      CLOG_ERROR("upgrade: %s; exiting without having served", st.message().c_str());
      _exit(1);
    }
    handover.reset();
    // The old daemon has stopped for good: the communicators start reading their links,
    // and the programs' sessions go on here, each from the request boundary where the old
    // one stopped it.
    router.StartShared();
    const int adopted = AdoptPrograms(takeover, &router);
    // What the RPC sessions serve is back in the table before any connection is accepted.
    router.AwaitAdopted(Deadline::AfterMs(5000));
    CLOG_INFO("upgrade: took over from %s with %d operator changes, %d stored objects and %d of %d program sessions",
              takeover.state.release().c_str(), takeover.state.operator_state_size(), takeover.state.objects_size(),
              adopted, takeover.state.programs_size());
  }

  // The accept loops start parked: a flood of connections queued since the sockets were
  // bound must not take the thread slots (RLIMIT_NPROC) that the next loop needs.
  (void)gate.Park(Deadline::AfterMs(0));  // no loop runs yet: parked at once
  static MetricsServer metrics_server(&admin);
  const bool accepting =
      StartDetached("the peer port", [fd = peer_listener.get()] { router.ServePeers(fd, &gate); }) &&
      StartDetached("the program socket", [fd = unix_listener.get()] { router.ServePrograms(fd, &gate); }) &&
      StartDetached("the admin socket", [fd = admin_listener.get()] { admin_server.Serve(fd, &gate); }) &&
      (!metrics_listener.valid() || StartDetached("the metrics port", [fd = metrics_listener.get()] {
         KeepRunning("the metrics port", [fd] { metrics_server.Serve(fd, &gate); });
       }));
  if (!accepting) {
    CLOG_ERROR("cannot start the threads that accept connections (see the line above; is RLIMIT_NPROC too low?)");
    _exit(1);
  }
  gate.Resume();
  if (metrics_listener.valid()) {
    CLOG_INFO("serving metrics (Prometheus) on http://%s/metrics", FormatSockAddr(metrics_bound).c_str());
  }
  const std::string sources = cli.config.empty() ? "command line" : cli.config + " and the command line";
  CLOG_INFO("serving programs on %s, daemons on %s (advertised as %s), operators on %s; timeout %d ms; settings: %s",
            flags.socket_path.c_str(), flags.listen.c_str(), my_addr.c_str(), flags.admin_socket.c_str(),
            flags.comm.timeout_ms, sources.c_str());
  // systemd follows the new process after an upgrade (Type=notify, NotifyAccess=all).
  NotifyServiceManager(cli.take_over_fd >= 0 ? "MAINPID=" + std::to_string(getpid()) + "\nREADY=1" : "READY=1");

  int sig = 0;
  for (;;) {
    sigwait(&stop, &sig);
    if (sig == SIGHUP) {
      ReloadDaemonSettings(cli, &flags, LiveParts{&fabric, &policy});
      continue;
    }
    if (sig == SIGUSR2) {
      if (!handed_over.load()) continue;  // not ours: only the upgrade's own signal ends the daemon
      // The new daemon serves; this one leaves the sockets to it (no unlink, no shutdown)
      // once the upgrade's reply has been written.
      if (!admin_server.WaitServing(0, Deadline::AfterMs(5000))) {
        CLOG_WARN("upgrade: an admin request is still being answered; exiting anyway");
      }
      // The other daemons keep this one's object locations while its connections end: the
      // new process holds the same copies at the same address.
      object_store.AnnounceReplacement(kReplacementGraceMs);
      CLOG_INFO("upgrade: handed over; exiting");
      _exit(0);
    }
    break;
  }
  // Orderly end: programs that connect from now on find no socket (and fall back to their
  // native library), calls in flight fail with the reason (on other hosts too, for
  // communicators spanning hosts), and programs get a grace period to hear it.
  NotifyServiceManager("STOPPING=1");
  CLOG_INFO("signal %d (%s): shutting down: refusing new connections, failing calls in flight, closing %zu "
            "program connections within %d ms",
            sig, strsignal(sig), router.Programs().size(), flags.shutdown_grace_ms);
  unlink(flags.socket_path.c_str());
  unlink(flags.admin_socket.c_str());
  gate.Stop();  // ends the accept loops
  shutdown(unix_listener.get(), SHUT_RDWR);  // connections still queued, and new ones, are refused
  shutdown(peer_listener.get(), SHUT_RDWR);
  const Status reason = SystemError("conduitd on %s is shutting down (%s): start it again to serve new calls",
                                    my_addr.c_str(), strsignal(sig));
  const size_t cut = router.Shutdown(reason, Deadline::AfterMs(flags.shutdown_grace_ms));
  if (cut > 0) {
    CLOG_WARN("%zu program connections did not hang up within %d ms and were closed", cut, flags.shutdown_grace_ms);
  }
  // Every service has stopped its loops and the connections it dialed, and the router has
  // shut the connections it served: the threads that served them end. Waiting for them
  // means no reply is cut mid-write and a thread that does not end is named.
  const std::vector<std::string> running = AwaitDetachedThreads(std::chrono::steady_clock::now() +
                                                                std::chrono::milliseconds(kThreadDrainMs));
  if (running.empty()) {
    CLOG_INFO("stopped: every connection and loop thread ended");
  } else {
    std::string names;
    for (const std::string& r : running) names += (names.empty() ? "" : ", ") + r;
    CLOG_WARN("stopped: threads still running after %d ms (%s); exiting without them", kThreadDrainMs, names.c_str());
  }
  // The services themselves live until the process ends (static, reached from the threads
  // of objects they own, such as a communicator's link readers): their destructors do not
  // run, so nothing is torn down under a thread that is still ending: _exit, not exit.
  _exit(0);
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) {
  try {
    return conduit::Main(argc, argv);
  } catch (const std::exception& e) {
    // Only while starting (every thread the services run is guarded): say why and go, with
    // _exit, since threads may already run.
    CLOG_ERROR("cannot start: %s (no thread or memory for the daemon's services? see RLIMIT_NPROC)", e.what());
    _exit(1);
  }
}
