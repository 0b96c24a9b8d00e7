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
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "admin/admin_api.h"
#include "admin/admin_server.h"
#include "admin/admin_socket.h"
#include "admin/daemon_routes.h"
#include "admin/metrics_server.h"
#include "collectives/registry.h"
#include "common/busy_poll.h"
#include "common/config_file.h"
#include "common/log.h"
#include "common/net_addr.h"
#include "common/thread_guard.h"
#include "common/version.h"
#include "gpu/runtime.h"
#include "objects/object_admin.h"
#include "objects/object_service.h"
#include "policy/fabric.h"
#include "protocol/peer_protocol.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"
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
#include "server/systemd_notify.h"
#include "transport/tcp.h"
#include "upgrade/handover.h"
#include "upgrade/upgrade_admin.h"

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
  int busy_poll_us = -1;  // -1: common/busy_poll.h's default
  int shutdown_grace_ms = 2000;  // how long programs have to hear why the daemon is going
  std::string cluster_key;
  bool insecure_peers = false;
  bool encrypt_peers = false;
  uint64_t rpc_link_assembly_bytes = 256ull << 20;
  uint32_t rpc_link_version = rpcproto::kPeerLinkVersion;
  bool rpc_managed_only = false;
  LogLevel log_level = LogLevel::kInfo;
  std::string metrics_listen;  // "" = no metrics port
  // Every setting as given, configuration file first, then the command line on top:
  // name -> its values (one, or a repeatable flag's list). A reload compares these.
  std::map<std::string, std::vector<std::string>> given;
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

// The parts of a running daemon that settings can change without a restart.
struct LiveParts {
  Fabric* fabric;
  ProgramPolicy* policy;
};

enum class FlagKind {
  kValue,   // --name VALUE; once in a file (the last one counts)
  kSwitch,  // --name alone; "name = true|false" in a file
  kList,    // --name VALUE, repeatable; may repeat in a file too
};

// One setting: a command-line flag "--name" and the configuration file's "name = value"
// are parsed by the same `set`, so both sources accept and refuse exactly the same values.
struct FlagSpec {
  const char* name;
  FlagKind kind;
  // Parses `value` into the flags; a refusal says why without naming the setting.
  Status (*set)(Flags& f, const std::string& value);
  // kList: empties the list (command-line values replace the file's).
  void (*clear)(Flags& f) = nullptr;
  // Applies the setting's new value to the running daemon (SIGHUP); null: needs a restart.
  void (*apply_live)(const Flags& fresh, const LiveParts& daemon) = nullptr;
};

// The largest number a setting of type T takes.
template <typename T>
constexpr unsigned long long MaxSetting() {
  if constexpr (std::is_floating_point_v<T>) {
    return 1ull << 53;  // every integer up to it is exact in a double
  } else {
    return static_cast<unsigned long long>(std::numeric_limits<T>::max());
  }
}

// A non-negative decimal number that fits T.
template <typename T>
Status SetNumber(const std::string& v, T* out) {
  constexpr unsigned long long max = MaxSetting<T>();
  errno = 0;
  unsigned long long n = strtoull(v.c_str(), nullptr, 10);
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE || n > max) {
    return InvalidArgument("'%s' is not a number from 0 to %llu", v.c_str(), max);
  }
  *out = static_cast<T>(n);
  return Status::Ok();
}

Status SetBool(const std::string& v, bool* out) {
  if (v != "true" && v != "false") return InvalidArgument("'%s' must be true or false", v.c_str());
  *out = v == "true";
  return Status::Ok();
}

Status Refused(bool ok, const char* why) { return ok ? Status::Ok() : InvalidArgument("%s", why); }

const FlagSpec kFlagSpecs[] = {
    {"socket", FlagKind::kValue, [](Flags& f, const std::string& v) { f.socket_path = v; return Status::Ok(); }},
    {"listen", FlagKind::kValue, [](Flags& f, const std::string& v) { f.listen = v; return Status::Ok(); }},
    {"advertise", FlagKind::kValue, [](Flags& f, const std::string& v) { f.advertise = v; return Status::Ok(); }},
    {"timeout-ms", FlagKind::kValue, [](Flags& f, const std::string& v) { return SetNumber(v, &f.comm.timeout_ms); }},
    {"deny-exe", FlagKind::kList,
     [](Flags& f, const std::string& v) {
       f.deny_exe.push_back(v);
       return Status::Ok();
     },
     [](Flags& f) { f.deny_exe.clear(); },
     [](const Flags& fresh, const LiveParts& d) { d.policy->set_denied(fresh.deny_exe); }},
    {"admin-socket", FlagKind::kValue, [](Flags& f, const std::string& v) { f.admin_socket = v; return Status::Ok(); }},
    {"admin-uid", FlagKind::kList,
     [](Flags& f, const std::string& v) {
       int uid = 0;
       CONDUIT_RETURN_IF_ERROR(SetNumber(v, &uid));
       f.admin.operator_uids.push_back(uid);
       return Status::Ok();
     },
     [](Flags& f) { f.admin.operator_uids.clear(); }},
    {"admin-mode", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       char* end = nullptr;
       unsigned long mode = strtoul(v.c_str(), &end, 8);
       if (v.empty() || v.find_first_not_of("01234567") != std::string::npos || *end != '\0' || mode > 0777) {
         return InvalidArgument("'%s' is not a file mode (octal, e.g. 0660)", v.c_str());
       }
       f.admin_mode = static_cast<unsigned>(mode);
       return Status::Ok();
     }},
    {"allreduce-algo", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       f.comm.allreduce_algo = v;
       return Refused(v == "auto" || v == "ring" || v == "rd", "must be auto, ring or rd");
     }},
    {"rd-max-bytes", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.comm.rd_max_bytes); }},
    {"rd-latency-bytes", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.comm.rd_latency_bytes); }},
    {"busy-poll-us", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       CONDUIT_RETURN_IF_ERROR(SetNumber(v, &f.busy_poll_us));
       return Refused(f.busy_poll_us <= kMaxBusyPollMicros, "must be at most 100000");
     }},
    {"shutdown-grace-ms", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       CONDUIT_RETURN_IF_ERROR(SetNumber(v, &f.shutdown_grace_ms));
       return Refused(f.shutdown_grace_ms <= 600000, "must be at most 600000 (10 minutes)");
     }},
    {"chunk-bytes", FlagKind::kValue, [](Flags& f, const std::string& v) { return SetNumber(v, &f.comm.chunk_bytes); }},
    {"max-shm-bytes", FlagKind::kValue, [](Flags& f, const std::string& v) { return SetNumber(v, &f.max_shm_bytes); }},
    {"rpc-inline-max", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.rpc_inline_max); }},
    {"rpc-link-assembly-bytes", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.rpc_link_assembly_bytes); }},
    {"rpc-link-version", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       CONDUIT_RETURN_IF_ERROR(SetNumber(v, &f.rpc_link_version));
       return Refused(f.rpc_link_version >= rpcproto::kMinPeerLinkVersion &&
                          f.rpc_link_version <= rpcproto::kPeerLinkVersion,
                      "must be 2 or 3");
     }},
    {"rpc-managed-only", FlagKind::kSwitch,
     [](Flags& f, const std::string& v) { return SetBool(v, &f.rpc_managed_only); }},
    // Its file is re-read on every SIGHUP; a new path needs a restart.
    {"topology", FlagKind::kValue, [](Flags& f, const std::string& v) { f.topology = v; return Status::Ok(); }},
    {"ring-order", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       Json order = Json::Object();
       order["order"] = v;
       return Refused(RingPolicy::FromJson(order, &f.ring).ok(), "must be locality or rank");
     },
     nullptr, [](const Flags& fresh, const LiveParts& d) { d.fabric->set_ring_policy(fresh.ring); }},
    {"flow-assignment", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       return Refused(ParseFlowAssignment(v, &f.flows.assignment), "must be primary, single, hash or balance");
     },
     nullptr,
     [](const Flags& fresh, const LiveParts& d) {
       // Paths reserved through the admin API stay.
       FlowPolicy flows = d.fabric->flow_policy();
       flows.assignment = fresh.flows.assignment;
       d.fabric->set_flow_policy(std::move(flows));
     }},
    {"object-peers", FlagKind::kValue, [](Flags& f, const std::string& v) { f.object_peers = v; return Status::Ok(); }},
    {"cluster-key", FlagKind::kValue, [](Flags& f, const std::string& v) { f.cluster_key = v; return Status::Ok(); }},
    {"insecure-peers", FlagKind::kSwitch, [](Flags& f, const std::string& v) { return SetBool(v, &f.insecure_peers); }},
    {"encrypt-peers", FlagKind::kSwitch, [](Flags& f, const std::string& v) { return SetBool(v, &f.encrypt_peers); }},
    {"object-memory-bytes", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.objects.memory_bytes); }},
    {"object-block-bytes", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.objects.block_bytes); }},
    {"object-bandwidth-bps", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.objects.bandwidth_Bps); }},
    {"object-latency-us", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.objects.latency_us); }},
    {"object-default-access", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       return Refused(objects::ParseAccess(v, &f.objects.default_access), "must be owner, group or world");
     }},
    {"object-quota-bytes", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.objects.quota_bytes); }},
    {"object-quota-objects", FlagKind::kValue,
     [](Flags& f, const std::string& v) { return SetNumber(v, &f.objects.quota_objects); }},
    {"log-level", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       return Refused(ParseLogLevel(v.c_str(), &f.log_level), "must be debug, info, warn or error");
     },
     nullptr, [](const Flags& fresh, const LiveParts&) { SetLogLevel(fresh.log_level); }},
    {"metrics-listen", FlagKind::kValue,
     [](Flags& f, const std::string& v) {
       SockAddr addr;
       Status st = ParseListenAddr(v, &addr);
       if (!st.ok()) return InvalidArgument("'%s' is not IP:PORT: %s", v.c_str(), st.message().c_str());
       f.metrics_listen = v;
       return Status::Ok();
     }},
};

const FlagSpec* FindFlag(std::string_view name) {
  for (const FlagSpec& spec : kFlagSpecs) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

// Sets one setting from either source and records it as given.
Status ApplySetting(Flags& f, const FlagSpec& spec, const std::string& value) {
  CONDUIT_RETURN_IF_ERROR(spec.set(f, value));
  std::vector<std::string>& given = f.given[spec.name];
  if (spec.kind != FlagKind::kList) given.clear();
  given.push_back(value);
  return Status::Ok();
}

// What the command line says, flags in order; --config is kept apart because the file it
// names is read first and the other flags override it.
struct CommandLine {
  std::string config;
  std::vector<std::pair<const FlagSpec*, std::string>> settings;
  // Set only by the daemon this one replaces (live upgrade, upgrade/handover.h): its end of
  // the handover socketpair. Not a setting: never in a file, never shown in --help.
  int take_over_fd = -1;
  // The command line as given, without argv[0] and --take-over-fd: what a live upgrade
  // starts the new daemon with.
  std::vector<std::string> args;
};

// The usage text: on stdout with exit 0 for --help, on stderr with exit 2 after a bad
// command line (`msg` says what was wrong).
[[noreturn]] void Usage(const char* msg, bool asked = false) {
  fprintf(asked ? stdout : stderr,
          "%s%s"
          "usage: conduitd [--config FILE] [--socket PATH] [--listen IP:PORT] [--advertise IP]\n"
          "                [--timeout-ms N] [--admin-socket PATH] [--admin-mode OCTAL] [--admin-uid UID]...\n"
          "                [--deny-exe NAME]... [--allreduce-algo auto|ring|rd] [--rd-max-bytes N]\n"
          "                [--rd-latency-bytes N]\n"
          "                [--chunk-bytes N] [--busy-poll-us N] [--max-shm-bytes N] [--rpc-inline-max N]\n"
          "                [--log-level debug|info|warn|error] [--metrics-listen IP:PORT]\n"
          "                [--topology FILE] [--ring-order locality|rank]\n"
          "                [--cluster-key FILE [--encrypt-peers] | --insecure-peers]\n"
          "                [--flow-assignment primary|single|hash|balance]\n"
          "  --config FILE settings from FILE (default: none): one `name = value` per line, the name\n"
          "                a flag below without its -- (listen = 0.0.0.0:7650); # starts a comment;\n"
          "                repeatable flags may repeat; --insecure-peers and --encrypt-peers take\n"
          "                true or false. Flags on the command line override the file (a repeatable\n"
          "                flag's values replace the file's list). SIGHUP re-reads it: log-level,\n"
          "                deny-exe, ring-order and flow-assignment apply at once, other changes\n"
          "                are logged and need a restart. docs/configuration.md\n"
          "  --socket      program socket (default $CONDUIT_SOCKET or %s)\n"
          "  --admin-socket  operator API, HTTP+JSON (default $CONDUIT_ADMIN_SOCKET, or the program\n"
          "                socket's name with -admin: conduitd.sock -> conduitd-admin.sock)\n"
          "  --admin-mode  permission bits of the admin socket (default 0660); whoever can connect\n"
          "                may read, only root, the daemon's uid and --admin-uid may change policy\n"
          "  --admin-uid   an operator besides root and the daemon's uid: changes policy, and reads\n"
          "                and deletes every object of the object store, with no object quota\n"
          "  --metrics-listen IP:PORT  also serve GET /metrics (Prometheus text) over plain TCP on\n"
          "                IP:PORT, for a Prometheus server to scrape; read-only, no authentication:\n"
          "                bind it to a management address (default: off). docs/admin-api.md\n"
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
          "  --busy-poll-us N  how long a wait on the small-call path (a program's next request, a\n"
          "                peer daemon's bytes) polls without blocking before it sleeps: a wake-up\n"
          "                costs more than a short collective (default 50; 0: never; always 0 on\n"
          "                one CPU)\n"
          "  --shutdown-grace-ms N  on SIGTERM/SIGINT, how long programs have to hear why\n"
          "                their calls fail before their connections are closed (default 2000)\n"
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
          "                               hold; past it the call fails (default 256 MiB)\n"
          "  --rpc-link-version N         newest RPC link version offered and accepted (default 3;\n"
          "                               2: as a release without GoAway, docs/rpc-protocol.md)\n"
          "  --rpc-managed-only           servers served through conduitd take calls only through\n"
          "                               it (no native listener for clients without the preload,\n"
          "                               so every call meets the policies)\n",
          msg, *msg ? "\n" : "", shimproto::kDefaultSocketPath, peerproto::kDefaultPort);
  exit(asked ? 0 : 2);
}

// Splits argv into settings (checked for a known name and a value, not yet parsed).
CommandLine ParseCommandLine(int argc, char** argv) {
  CommandLine cli;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") Usage("", /*asked=*/true);
    const FlagSpec* spec = a.rfind("--", 0) == 0 ? FindFlag(std::string_view(a).substr(2)) : nullptr;
    if (a.rfind("--take-over-fd=", 0) == 0) {
      const std::string fd = a.substr(strlen("--take-over-fd="));
      if (!SetNumber(fd, &cli.take_over_fd).ok() || cli.take_over_fd < 3) Usage("bad --take-over-fd");
      continue;
    }
    cli.args.push_back(a);
    if (a == "--config") {
      if (i + 1 >= argc) Usage("missing value for --config");
      cli.config = argv[++i];
      cli.args.push_back(cli.config);
    } else if (spec == nullptr) {
      Usage(("unknown flag " + a).c_str());
    } else if (spec->kind == FlagKind::kSwitch) {
      cli.settings.emplace_back(spec, "true");
    } else {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      cli.settings.emplace_back(spec, argv[++i]);
      cli.args.push_back(argv[i]);
    }
  }
  return cli;
}

// The settings of the configuration file at `path` on top of `f`.
Status ApplyConfigFile(const std::string& path, Flags& f) {
  return ReadConfigFile(path, [&f](const ConfigEntry& e) {
    if (e.name == "config") return InvalidArgument("'config' names this file; it cannot be set inside it");
    const FlagSpec* spec = FindFlag(e.name);
    if (spec == nullptr) {
      return InvalidArgument("unknown setting '%s' (the settings are conduitd's flags without '--')", e.name.c_str());
    }
    Status st = ApplySetting(f, *spec, e.value);
    return st.ok() ? st : Status(st.code(), e.name + ": " + st.message());
  });
}

// The command line's settings on top of `f`: each replaces the file's value, and a
// repeatable flag's first occurrence drops the file's list.
Status ApplyCommandLine(const CommandLine& cli, Flags& f) {
  std::set<std::string> lists_restarted;
  for (const auto& [spec, value] : cli.settings) {
    if (spec->kind == FlagKind::kList && lists_restarted.insert(spec->name).second) {
      spec->clear(f);
      f.given.erase(spec->name);
    }
    Status st = ApplySetting(f, *spec, value);
    if (!st.ok()) return Status(st.code(), std::string("--") + spec->name + ": " + st.message());
  }
  return Status::Ok();
}

// Checks that need every setting, and the defaults that depend on others.
Status FinishFlags(Flags& f) {
  if (f.admin_socket.empty()) {
    const char* env = getenv(kAdminSocketEnv);
    f.admin_socket = env != nullptr && *env != '\0' ? env : AdminSocketFor(f.socket_path);
  }
  if (f.comm.timeout_ms <= 0) return InvalidArgument("timeout-ms must be positive");
  if (f.comm.chunk_bytes == 0) return InvalidArgument("chunk-bytes must be positive");
  if (f.objects.block_bytes < 4096) return InvalidArgument("object-block-bytes must be at least 4096");
  if (f.insecure_peers && !f.cluster_key.empty()) {
    return InvalidArgument("insecure-peers and cluster-key exclude each other");
  }
  if (f.encrypt_peers && f.cluster_key.empty()) return InvalidArgument("encrypt-peers needs cluster-key");
  if (f.objects.quota_objects == 0) return InvalidArgument("object-quota-objects must be positive");
  // The object store's operators are the admin API's (access.h).
  f.objects.operator_uids = f.admin.operator_uids;
  return Status::Ok();
}

Flags DefaultFlags() {
  Flags f;
  const char* env = getenv(shimproto::kSocketEnv);
  f.socket_path = env != nullptr && *env != '\0' ? env : shimproto::kDefaultSocketPath;
  return f;
}

// Defaults, then the configuration file, then the command line: what a reload re-reads.
Status LoadFlags(const CommandLine& cli, Flags* out) {
  Flags f = DefaultFlags();
  if (!cli.config.empty()) CONDUIT_RETURN_IF_ERROR(ApplyConfigFile(cli.config, f));
  CONDUIT_RETURN_IF_ERROR(ApplyCommandLine(cli, f));
  CONDUIT_RETURN_IF_ERROR(FinishFlags(f));
  *out = std::move(f);
  return Status::Ok();
}

// At start every error ends the daemon with exit status 2: a bad file with its own line,
// a bad command line with the usage.
Flags ParseFlags(const CommandLine& cli) {
  Flags f = DefaultFlags();
  if (!cli.config.empty()) {
    Status st = ApplyConfigFile(cli.config, f);
    if (!st.ok()) {
      fprintf(stderr, "conduitd: %s\n(conduitd --help and docs/configuration.md describe the settings)\n",
              st.message().c_str());
      exit(2);
    }
  }
  Status st = ApplyCommandLine(cli, f);
  if (st.ok()) st = FinishFlags(f);
  if (!st.ok()) Usage(st.message().c_str());
  return f;
}

std::string ShowValues(const std::vector<std::string>* values) {
  if (values == nullptr) return "(default)";
  std::string out;
  for (const auto& v : *values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

// SIGHUP: re-reads the configuration file (with the command line on top, as at start) and
// applies what changed and can change live; every other change is logged and waits for a
// restart. Settings nobody changed in the file are left alone, so what the admin API set
// at run time stays. Then the topology file is re-read. A file that does not load changes
// nothing.
void Reload(const CommandLine& cli, Flags* running, const LiveParts& daemon) {
  std::vector<std::string> applied;
  int need_restart = 0;
  if (!cli.config.empty()) {
    Flags fresh;
    Status st = LoadFlags(cli, &fresh);
    if (!st.ok()) {
      CLOG_WARN("SIGHUP: %s; nothing reloaded, every setting stays as it was", st.message().c_str());
      return;
    }
    std::set<std::string> names;
    for (const auto& [name, values] : running->given) names.insert(name);
    for (const auto& [name, values] : fresh.given) names.insert(name);
    for (const std::string& name : names) {
      auto was = running->given.find(name);
      auto now = fresh.given.find(name);
      const std::vector<std::string>* before = was == running->given.end() ? nullptr : &was->second;
      const std::vector<std::string>* after = now == fresh.given.end() ? nullptr : &now->second;
      if (before != nullptr && after != nullptr && *before == *after) continue;
      const FlagSpec* spec = FindFlag(name);
      if (spec == nullptr || spec->apply_live == nullptr) {
        const std::string old_value = ShowValues(before);
        CLOG_WARN("SIGHUP: %s changed from %s to %s in %s, which needs a restart; keeping %s", name.c_str(),
                  old_value.c_str(), ShowValues(after).c_str(), cli.config.c_str(), old_value.c_str());
        ++need_restart;
        continue;
      }
      spec->apply_live(fresh, daemon);
      // What is in force now: the new value, for the next reload to compare against.
      if (after == nullptr) {
        running->given.erase(name);
      } else {
        running->given[name] = *after;
      }
      applied.push_back(name + " = " + ShowValues(after));
    }
  }
  std::string topology = "no topology file";
  if (!running->topology.empty()) {
    Status st = daemon.fabric->topology().Reload();
    topology = st.ok() ? "topology " + running->topology + " re-read (generation " +
                             std::to_string(daemon.fabric->topology().generation()) + ")"
                       : "topology not reloaded: " + st.message();
    if (!st.ok()) CLOG_WARN("SIGHUP: %s", topology.c_str());
  }
  if (cli.config.empty()) {
    CLOG_INFO("SIGHUP: reloaded: no configuration file (--config); %s", topology.c_str());
    return;
  }
  std::string changed;
  for (const auto& a : applied) changed += (changed.empty() ? "" : "; ") + a;
  CLOG_INFO("SIGHUP: reloaded %s: %s; %d changed setting(s) need a restart; %s", cli.config.c_str(),
            applied.empty() ? "no live setting changed" : ("applied " + changed).c_str(), need_restart,
            topology.c_str());
}

// Live upgrade (docs/upgrade.md): how long the new daemon waits for the old one's sockets
// and state, and for its Go after Ready.
constexpr int kHandoverReceiveMs = 30000;
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

// How long a live upgrade waits for program sessions to reach the end of a request.
constexpr int kParkProgramsMs = 3000;
// How long the other daemons keep this one's object locations after it handed over.
constexpr int kReplacementGraceMs = 10000;

Status SnapshotParked(const std::string& my_addr, upgrade::v1::DaemonState* state, std::vector<UniqueFd>* descriptors);

// The state handed to the new daemon, taken with every accept loop parked: program
// sessions stopped between two requests (those of the object store and of collectives,
// with the communicators; RPC sessions do not move yet, docs/upgrade.md), the stored
// objects, the operator's changes.
Status SnapshotForUpgrade(const std::string& program_socket, const std::string& admin_socket,
                          const std::string& my_addr, upgrade::v1::DaemonState* state,
                          std::vector<UniqueFd>* descriptors) {
  const DaemonParts& d = daemon_parts;
  std::vector<HandedProgram> programs;
  std::vector<HandedShared> shared;
  CONDUIT_RETURN_IF_ERROR(d.router->ParkPrograms(Deadline::AfterMs(kParkProgramsMs), &programs, &shared));
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
  const CommandLine cli = ParseCommandLine(argc, argv);
  Flags flags = ParseFlags(cli);
  SetLogLevel(flags.log_level);
  if (flags.busy_poll_us >= 0) SetBusyPollMicros(flags.busy_poll_us);
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
  AddDaemonRoutes(&admin, DaemonInfo{kDaemonVersion, my_addr, flags.socket_path, flags.admin_socket, started}, &router,
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
  upgrade_setup.hooks.snapshot = [&flags, my_addr](upgrade::v1::DaemonState* state,
                                                    std::vector<UniqueFd>* descriptors) {
    return SnapshotForUpgrade(flags.socket_path, flags.admin_socket, my_addr, state, descriptors);
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
      Reload(cli, &flags, LiveParts{&fabric, &policy});
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
  CLOG_INFO("stopped");
  // The services' threads are detached and never joined (they end with the process), so
  // static destructors must not run under them: _exit, not exit.
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
