// conduitd: the per-host Conduit daemon.
//
// Programs on this host reach it through a Unix socket (libnccl.so.2 from libmccs-nccl);
// other hosts' daemons reach it over TCP for rendezvous and collective traffic.
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/resource.h>

#include <thread>
#include <vector>

#include "admin/admin_api.h"
#include "admin/admin_server.h"
#include "admin/admin_socket.h"
#include "admin/daemon_routes.h"
#include "collectives/registry.h"
#include "gpu/runtime.h"
#include "common/log.h"
#include "common/net_addr.h"
#include "common/peer_protocol.h"
#include "common/shim_protocol.h"
#include "common/version.h"
#include "policy/fabric.h"
#include "objects/object_admin.h"
#include "objects/object_service.h"
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
#include "transport/tcp.h"

namespace conduit {
namespace {

struct Flags {
  std::string socket_path;
  std::string listen = "0.0.0.0:" + std::to_string(peerproto::kDefaultPort);
  std::string advertise;
  std::string admin_socket;  // default: next to socket_path
  unsigned admin_mode = 0660;
  AdminServerOptions admin;
  CommOptions comm;
  std::vector<std::string> deny_exe;
  uint64_t max_shm_bytes = 64ull << 30;
  std::string topology;
  FlowPolicy flows;
  RingPolicy ring;
  objects::ObjectOptions objects;
  std::string object_peers;
  uint32_t rpc_inline_max = 512;
  std::string cluster_key;
  bool insecure_peers = false;
  bool encrypt_peers = false;
  uint64_t rpc_link_assembly_bytes = 256ull << 20;
};

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

// The usage text: on stdout with exit 0 for --help, on stderr with exit 2 after a bad
// command line (`msg` says what was wrong).
[[noreturn]] void Usage(const char* msg, bool asked = false) {
  fprintf(asked ? stdout : stderr,
          "%s%s"
          "usage: conduitd [--socket PATH] [--listen IP:PORT] [--advertise IP] [--timeout-ms N]\n"
          "                [--admin-socket PATH] [--admin-mode OCTAL] [--admin-uid UID]...\n"
          "                [--deny-exe NAME]... [--allreduce-algo auto|ring|rd] [--rd-max-bytes N]\n"
          "                [--rd-latency-bytes N]\n"
          "                [--chunk-bytes N] [--max-shm-bytes N] [--rpc-inline-max N]\n"
          "                [--log-level debug|info|warn|error]\n"
          "                [--topology FILE] [--ring-order locality|rank]\n"
          "                [--cluster-key FILE [--encrypt-peers] | --insecure-peers]\n"
          "                [--flow-assignment primary|single|hash|balance]\n"
          "  --socket      program socket (default $CONDUIT_SOCKET or %s)\n"
          "  --admin-socket  operator API, HTTP+JSON (default $CONDUIT_ADMIN_SOCKET, or the program\n"
          "                socket's name with -admin: conduitd.sock -> conduitd-admin.sock)\n"
          "  --admin-mode  permission bits of the admin socket (default 0660); whoever can connect\n"
          "                may read, only root, the daemon's uid and --admin-uid may change policy\n"
          "  --admin-uid   an operator besides root and the daemon's uid: changes policy, and reads\n"
          "                and deletes every object of the object store, with no object quota\n"
          "  --listen      TCP address for other daemons (default 0.0.0.0:%d)\n"
          "  --cluster-key FILE  the cluster's shared key (64 hex digits, mode 0600, owned by root or\n"
          "                this user; `conduitctl keygen FILE` makes one): every connection between\n"
          "                daemons proves it, both ways. Without it the daemon serves only programs\n"
          "                on this host (its peer port answers nobody else). docs/security.md\n"
          "  --encrypt-peers  also encrypt RPC and object traffic between daemons (AES-256-GCM);\n"
          "                every daemon of the cluster must agree\n"
          "  --insecure-peers  no authentication between daemons (trusted networks only): any host\n"
          "                that reaches the peer port can join communicators and read their data\n"
          "  --advertise   address other daemons use to reach this one (default: the listen IP,\n"
          "                or this host's first non-loopback IPv4 address)\n"
          "  --timeout-ms  bound on every wait for peers, local ranks or links (default 300000)\n"
          "  --deny-exe NAME  refuse programs whose executable (by /proc/PID/exe, not by what the\n"
          "                program says) is named NAME; repeatable (default: none)\n"
          "  --max-shm-bytes N  the largest shared buffer a program may register (default 64 GiB)\n"
          "  --allreduce-algo auto|ring|rd  all-reduce algorithm (default auto: by the model below)\n"
          "  --chunk-bytes N  pipelining chunk of ring collectives between hosts (default 512 KiB)\n"
          "  --log-level   debug, info, warn or error (default info)\n"
          "  --rd-max-bytes N, --rd-latency-bytes N  all-reduce: recursive doubling up to N bytes\n"
          "                (64 KiB) where it beats the ring given a link's latency x bandwidth (4096)\n"
          "  --topology    the operator's host/topology description (JSON, docs/topology.md);\n"
          "                re-read on SIGHUP and POST /v1/topology/reload\n"
          "  --ring-order  ring order of new communicators (default locality)\n"
          "  --flow-assignment  paths of collective connections (default balance)\n"
          "object store (libhoplite):\n"
          "  --object-peers IP:PORT,...   every daemon of the object store (this one included)\n"
          "  --object-memory-bytes N      store size; LRU copies with another copy are evicted (default 8 GiB)\n"
          "  --object-block-bytes N       pipelining block (default 256 KiB)\n"
          "  --object-bandwidth-bps N     reduce-degree model: link bandwidth in bytes/s (default: measured)\n"
          "  --object-latency-us N        reduce-degree model: per-hop latency (default: measured)\n"
          "  --object-default-access owner|group|world  who may read an object whose creator did not\n"
          "                               say: its owner, also its owner's group, or every user of\n"
          "                               every host (default owner; operators always may)\n"
          "  --object-quota-bytes N       per uid: bytes of objects its programs create on this daemon\n"
          "                               (Puts, Reduce targets; default half of --object-memory-bytes)\n"
          "  --object-quota-objects N     per uid: number of such objects (default 65536); operators\n"
          "                               (root, the daemon's uid, --admin-uid) have no quota\n"
          "RPC service (libmrpc-grpc):\n"
          "  --rpc-inline-max N           messages up to N bytes travel inside frames, larger ones\n"
          "                               through shared memory (default 512)\n"
          "  --rpc-link-assembly-bytes N  private memory the incomplete messages of one link may\n"
          "                               hold; past it the call fails (default 256 MiB)\n",
          msg, *msg ? "\n" : "", shimproto::kDefaultSocketPath, peerproto::kDefaultPort);
  exit(asked ? 0 : 2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  const char* env = getenv(shimproto::kSocketEnv);
  f.socket_path = env != nullptr && *env != '\0' ? env : shimproto::kDefaultSocketPath;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    auto number = [&]() -> long long {
      std::string v = value();
      char* end = nullptr;
      long long n = strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 0) Usage(("bad number for " + a + ": " + v).c_str());
      return n;
    };
    if (a == "--socket") f.socket_path = value();
    else if (a == "--listen") f.listen = value();
    else if (a == "--advertise") f.advertise = value();
    else if (a == "--timeout-ms") f.comm.timeout_ms = static_cast<int>(number());
    else if (a == "--deny-exe") f.deny_exe.push_back(value());
    else if (a == "--admin-socket") f.admin_socket = value();
    else if (a == "--admin-uid") f.admin.operator_uids.push_back(static_cast<int>(number()));
    else if (a == "--admin-mode") {
      std::string v = value();
      char* end = nullptr;
      unsigned long mode = strtoul(v.c_str(), &end, 8);
      if (v.empty() || *end != '\0' || mode > 0777) Usage(("bad --admin-mode (octal, e.g. 0660): " + v).c_str());
      f.admin_mode = static_cast<unsigned>(mode);
    }
    else if (a == "--allreduce-algo") {
      f.comm.allreduce_algo = value();
      if (f.comm.allreduce_algo != "auto" && f.comm.allreduce_algo != "ring" && f.comm.allreduce_algo != "rd") {
        Usage("--allreduce-algo must be auto, ring or rd");
      }
    } else if (a == "--rd-max-bytes") f.comm.rd_max_bytes = number();
    else if (a == "--rd-latency-bytes") f.comm.rd_latency_bytes = number();
    else if (a == "--chunk-bytes") f.comm.chunk_bytes = number();
    else if (a == "--max-shm-bytes") f.max_shm_bytes = number();
    else if (a == "--rpc-inline-max") f.rpc_inline_max = static_cast<uint32_t>(number());
    else if (a == "--rpc-link-assembly-bytes") f.rpc_link_assembly_bytes = number();
    else if (a == "--topology") f.topology = value();
    else if (a == "--ring-order") {
      Json order = Json::Object();
      order["order"] = value();
      if (!RingPolicy::FromJson(order, &f.ring).ok()) Usage("--ring-order must be locality or rank");
    } else if (a == "--flow-assignment") {
      if (!ParseFlowAssignment(value(), &f.flows.assignment)) Usage("--flow-assignment must be primary, single, hash or balance");
    }
    else if (a == "--object-peers") f.object_peers = value();
    else if (a == "--cluster-key") f.cluster_key = value();
    else if (a == "--insecure-peers") f.insecure_peers = true;
    else if (a == "--encrypt-peers") f.encrypt_peers = true;
    else if (a == "--object-memory-bytes") f.objects.memory_bytes = number();
    else if (a == "--object-block-bytes") f.objects.block_bytes = number();
    else if (a == "--object-bandwidth-bps") f.objects.bandwidth_Bps = static_cast<double>(number());
    else if (a == "--object-latency-us") f.objects.latency_us = static_cast<double>(number());
    else if (a == "--object-default-access") {
      if (!objects::ParseAccess(value(), &f.objects.default_access)) {
        Usage("--object-default-access must be owner, group or world");
      }
    } else if (a == "--object-quota-bytes") f.objects.quota_bytes = number();
    else if (a == "--object-quota-objects") f.objects.quota_objects = number();
    else if (a == "--log-level") {
      LogLevel level;
      if (!ParseLogLevel(value().c_str(), &level)) Usage("bad --log-level");
      SetLogLevel(level);
    } else if (a == "-h" || a == "--help") Usage("", /*asked=*/true);
    else Usage(("unknown flag " + a).c_str());
  }
  if (f.admin_socket.empty()) {
    const char* env = getenv(kAdminSocketEnv);
    f.admin_socket = env != nullptr && *env != '\0' ? env : AdminSocketFor(f.socket_path);
  }
  if (f.comm.timeout_ms <= 0) Usage("--timeout-ms must be positive");
  if (f.comm.chunk_bytes == 0) Usage("--chunk-bytes must be positive");
  if (f.objects.block_bytes < 4096) Usage("--object-block-bytes must be at least 4096");
  if (f.insecure_peers && !f.cluster_key.empty()) Usage("--insecure-peers and --cluster-key exclude each other");
  if (f.encrypt_peers && f.cluster_key.empty()) Usage("--encrypt-peers needs --cluster-key");
  if (f.objects.quota_objects == 0) Usage("--object-quota-objects must be positive");
  // The object store's operators are the admin API's (access.h).
  f.objects.operator_uids = f.admin.operator_uids;
  return f;
}

int Main(int argc, char** argv) {
  SetLogTag("conduitd");
  Flags flags = ParseFlags(argc, argv);
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
  sigaddset(&stop, SIGHUP);  // reload the topology
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

  UniqueFd peer_listener;
  SockAddr bound;
  Status st = TcpListen(flags.listen, &peer_listener, &bound);
  if (!st.ok()) {
    CLOG_ERROR("%s", st.message().c_str());
    return 1;
  }
  std::string port = FormatSockAddr(bound);
  port = port.substr(port.rfind(':') + 1);
  std::string ip = flags.advertise;
  if (ip.empty()) {
    ip = flags.listen.substr(0, flags.listen.rfind(':'));
    if (ip.empty() || ip == "0.0.0.0" || ip == "[::]") ip = PrimaryIpv4Address();
  }
  std::string my_addr = (ip.find(':') != std::string::npos && ip[0] != '[') ? "[" + ip + "]:" + port : ip + ":" + port;

  UniqueFd unix_listener;
  st = ListenUnix(flags.socket_path, 0666, &unix_listener);
  if (!st.ok()) {
    CLOG_ERROR("%s", st.message().c_str());
    return 1;
  }
  UniqueFd admin_listener;
  st = ListenUnix(flags.admin_socket, flags.admin_mode, &admin_listener);
  if (!st.ok()) {
    CLOG_ERROR("admin socket: %s", st.message().c_str());
    return 1;
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
    if (!st.ok()) {
      CLOG_ERROR("%s", st.message().c_str());
      return 1;
    }
  }
  static std::unique_ptr<PeerSecurity> security;
  st = PeerSecurity::Create(std::move(peer_options), &security);
  if (!st.ok()) {
    CLOG_ERROR("%s", st.message().c_str());
    return 1;
  }
  if (security->mode() == PeerMode::kInsecure) {
    CLOG_WARN("%s", security->Describe().c_str());
  } else {
    CLOG_INFO("%s", security->Describe().c_str());
  }
  flags.comm.security = security.get();

  // GPUs, if any: probed (and the combine kernels compiled) before programs can arrive;
  // logs whether device buffers are served and, if not, why.
  gpu::Runtime::Get();

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
  static rpc::RpcService rpc(rpc_options, &policy);
  flags.objects.security = security.get();
  flags.objects.self = my_addr;
  flags.objects.peers = SplitList(flags.object_peers);
  flags.objects.timeout_ms = flags.comm.timeout_ms;
  static objects::ObjectService object_store(flags.objects, &policy);
  object_store.Start();
  static ServiceRouter router(security.get());
  router.Add(ServiceId::kCollectives, &collectives);
  router.Add(ServiceId::kRpc, &rpc);
  router.Add(ServiceId::kObjects, &object_store);

  static AdminApi admin;
  AddDaemonRoutes(&admin, DaemonInfo{kDaemonVersion, my_addr, flags.socket_path, flags.admin_socket}, &router, &policy);
  AddCollectiveAdmin(&admin, &registry);
  rpc::AddRpcAdmin(&admin, &rpc);
  AddFabricAdmin(&admin, &fabric);
  objects::AddObjectAdmin(&admin, &object_store);
  static AdminServer admin_server(&admin, flags.admin);

  std::thread([fd = peer_listener.get()] { router.ServePeers(fd); }).detach();
  std::thread([fd = unix_listener.get()] { router.ServePrograms(fd); }).detach();
  std::thread([fd = admin_listener.get()] { admin_server.Serve(fd); }).detach();
  CLOG_INFO("serving programs on %s, daemons on %s (advertised as %s), operators on %s; timeout %d ms",
            flags.socket_path.c_str(), flags.listen.c_str(), my_addr.c_str(), flags.admin_socket.c_str(),
            flags.comm.timeout_ms);

  int sig = 0;
  for (;;) {
    sigwait(&stop, &sig);
    if (sig != SIGHUP) break;
    Status reloaded = fabric.topology().Reload();
    if (!reloaded.ok()) CLOG_WARN("SIGHUP: topology not reloaded: %s", reloaded.message().c_str());
  }
  CLOG_INFO("signal %d: shutting down", sig);
  unlink(flags.socket_path.c_str());
  unlink(flags.admin_socket.c_str());
  // Sessions and links are torn down by process exit; peers see their connections close.
  _exit(0);
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
