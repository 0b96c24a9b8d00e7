#include "settings/daemon_settings.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <set>
#include <type_traits>

#include "admin/admin_socket.h"
#include "collectives/comm_config.h"
#include "common/busy_poll.h"
#include "common/config_file.h"
#include "common/json.h"
#include "objects/access.h"
#include "protocol/peer_protocol.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"
#include "transport/congestion.h"

namespace conduit {
namespace {

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

// "auto" (unset: the daemon decides, as the setting's help says) or a number as SetNumber.
template <typename T>
Status SetOptionalNumber(const std::string& v, std::optional<T>* out) {
  if (v == "auto") {
    out->reset();
    return Status::Ok();
  }
  T n{};
  CONDUIT_RETURN_IF_ERROR(SetNumber(v, &n));
  *out = n;
  return Status::Ok();
}

Status SetBool(const std::string& v, bool* out) {
  if (v != "true" && v != "false") return InvalidArgument("'%s' must be true or false", v.c_str());
  *out = v == "true";
  return Status::Ok();
}

Status Refused(bool ok, const char* why) { return ok ? Status::Ok() : InvalidArgument("%s", why); }

// A spin budget in microseconds (common/busy_poll.h).
Status SetBusyPollBudget(const std::string& v, int* out) {
  CONDUIT_RETURN_IF_ERROR(SetNumber(v, out));
  return Refused(*out <= kMaxBusyPollMicros, "must be at most 100000");
}

using Kind = SettingKind;
using Group = SettingGroup;

std::vector<SettingSpec> MakeSpecs() {
  return {
      {.name = "socket",
       .value_name = "PATH",
       .default_value = shimproto::kDefaultSocketPath,
       .default_env = shimproto::kSocketEnv,
       .default_note = std::string("$") + shimproto::kSocketEnv + ", else " + shimproto::kDefaultSocketPath,
       .help = "the Unix socket programs connect to",
       .set = [](DaemonSettings& s, const std::string& v) { s.socket_path = v; return Status::Ok(); }},
      {.name = "admin-socket",
       .value_name = "PATH",
       .default_env = kAdminSocketEnv,
       .default_note = std::string("$") + kAdminSocketEnv +
                       ", else the program socket's name with -admin: conduitd.sock -> conduitd-admin.sock",
       .help = "the operator API, HTTP+JSON (docs/admin-api.md)",
       .set = [](DaemonSettings& s, const std::string& v) { s.admin_socket = v; return Status::Ok(); }},
      {.name = "admin-mode",
       .value_name = "OCTAL",
       .default_value = "0660",
       .help = "permission bits of the admin socket; whoever can connect may read, only root, the daemon's uid "
               "and --admin-uid may change policy",
       .set = [](DaemonSettings& s, const std::string& v) {
         char* end = nullptr;
         unsigned long mode = strtoul(v.c_str(), &end, 8);
         if (v.empty() || v.find_first_not_of("01234567") != std::string::npos || *end != '\0' || mode > 0777) {
           return InvalidArgument("'%s' is not a file mode (octal, e.g. 0660)", v.c_str());
         }
         s.admin_mode = static_cast<unsigned>(mode);
         return Status::Ok();
       }},
      {.name = "admin-uid",
       .kind = Kind::kList,
       .value_name = "UID",
       .default_note = "none",
       .help = "an operator besides root and the daemon's uid: changes policy, and reads and deletes every object "
               "of the object store, with no object quota; repeatable",
       .set =
           [](DaemonSettings& s, const std::string& v) {
             int uid = 0;
             CONDUIT_RETURN_IF_ERROR(SetNumber(v, &uid));
             s.admin.operator_uids.push_back(uid);
             return Status::Ok();
           },
       .clear = [](DaemonSettings& s) { s.admin.operator_uids.clear(); }},
      {.name = "metrics-listen",
       .value_name = "IP:PORT",
       .default_note = "off",
       .help = "also serve GET /metrics (Prometheus text) over plain TCP on IP:PORT, for a Prometheus server to "
               "scrape; read-only, no authentication: bind it to a management address. docs/admin-api.md",
       .set = [](DaemonSettings& s, const std::string& v) {
         SockAddr addr;
         Status st = ParseListenAddr(v, &addr);
         if (!st.ok()) return InvalidArgument("'%s' is not IP:PORT: %s", v.c_str(), st.message().c_str());
         s.metrics_listen = v;
         return Status::Ok();
       }},
      {.name = "listen",
       .value_name = "IP:PORT",
       .default_value = "0.0.0.0:" + std::to_string(peerproto::kDefaultPort),
       .help = "TCP address for other daemons",
       .set = [](DaemonSettings& s, const std::string& v) { s.listen = v; return Status::Ok(); }},
      {.name = "advertise",
       .value_name = "IP",
       .default_note = "the listen IP, or this host's first non-loopback IPv4 address",
       .help = "the address other daemons use to reach this one",
       .set = [](DaemonSettings& s, const std::string& v) { s.advertise = v; return Status::Ok(); }},
      {.name = "cluster-key",
       .value_name = "FILE",
       .default_note = "none: the daemon serves only programs on this host, its peer port answers nobody else",
       .help = "the cluster's shared key (64 hex digits, mode 0600, owned by root or this user; `conduitctl "
               "keygen FILE` makes one): every connection between daemons proves it, both ways. "
               "docs/security.md",
       .set = [](DaemonSettings& s, const std::string& v) { s.cluster_key = v; return Status::Ok(); }},
      {.name = "encrypt-peers",
       .kind = Kind::kSwitch,
       .default_value = "false",
       .help = "also encrypt RPC and object traffic between daemons (AES-256-GCM); needs --cluster-key; every "
               "daemon of the cluster must agree",
       .set = [](DaemonSettings& s, const std::string& v) { return SetBool(v, &s.encrypt_peers); }},
      {.name = "insecure-peers",
       .kind = Kind::kSwitch,
       .default_value = "false",
       .help = "no authentication between daemons (trusted networks only): any host that reaches the peer port "
               "can join communicators and read their data; excludes --cluster-key",
       .set = [](DaemonSettings& s, const std::string& v) { return SetBool(v, &s.insecure_peers); }},
      {.name = "timeout-ms",
       .value_name = "N",
       .default_value = "300000",
       .help = "bound on every wait for peers, local ranks or links",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.comm.timeout_ms); }},
      {.name = "deny-exe",
       .kind = Kind::kList,
       .value_name = "NAME",
       .default_note = "none",
       .help = "refuse programs whose executable (by /proc/PID/exe, not by what the program says) is named NAME; "
               "repeatable; applies at once on SIGHUP. While any is set, a program whose executable conduitd cannot "
               "read (outside its pid namespace, an unreadable link) is refused too",
       .set =
           [](DaemonSettings& s, const std::string& v) {
             s.deny_exe.push_back(v);
             return Status::Ok();
           },
       .clear = [](DaemonSettings& s) { s.deny_exe.clear(); },
       .apply_live = [](const DaemonSettings& fresh, const LiveParts& d) { d.policy->set_denied(fresh.deny_exe); }},
      {.name = "max-shm-bytes",
       .value_name = "N",
       .default_value = std::to_string(64ull << 30),
       .help = "the largest shared buffer a program may register",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.max_shm_bytes); }},
      {.name = "allreduce-algo",
       .value_name = "auto|ring|rd|rh",
       .default_value = "auto",
       .help = "all-reduce algorithm between hosts: the ring, recursive doubling (rd) or recursive halving "
               "and doubling (rh); auto picks recursive doubling where the model of --rd-max-bytes and "
               "--rd-latency-bytes says it beats the ring",
       .set = [](DaemonSettings& s, const std::string& v) {
         s.comm.allreduce_algo = v;
         return Refused(IsAllReduceAlgorithm(v), "must be auto, ring, rd or rh");
       }},
      {.name = "rd-max-bytes",
       .value_name = "N|auto",
       .default_value = "auto",
       .help = "all-reduce: the largest size recursive doubling is considered for (auto: 1 MiB on 2 hosts "
               "where every daemon of the communicator speaks collective protocol 6, else 64 KiB)",
       .set = [](DaemonSettings& s, const std::string& v) { return SetOptionalNumber(v, &s.comm.rd_max_bytes); }},
      {.name = "rd-latency-bytes",
       .value_name = "N",
       .default_value = "4096",
       .help = "all-reduce: a link's latency x bandwidth, in bytes, for the model above",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.comm.rd_latency_bytes); }},
      {.name = "rh-max-bytes",
       .value_name = "N|auto",
       .default_value = "auto",
       .help = "all-reduce on 4 hosts and more: the largest size recursive halving and doubling is used "
               "for above --rd-max-bytes (the ring above it; 0: never; auto: 2 MiB where every daemon of "
               "the communicator speaks collective protocol 5, 1 MiB where 4, else 0)",
       .set = [](DaemonSettings& s, const std::string& v) { return SetOptionalNumber(v, &s.comm.rh_max_bytes); }},
      {.name = "chunk-bytes",
       .value_name = "N",
       .default_value = "524288",
       .help = "pipelining chunk of ring collectives between hosts",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.comm.chunk_bytes); }},
      {.name = "device-p2p",
       .value_name = "direct|host",
       .default_value = "direct",
       .help = "point-to-point on device buffers between ranks of this daemon: the receiver's GPU copies from "
               "the sender's buffer (direct), or both go through pinned host memory (host), as between hosts",
       .set = [](DaemonSettings& s, const std::string& v) {
         s.comm.device_p2p_direct = v == "direct";
         return Refused(v == "direct" || v == "host", "must be direct or host");
       }},
      {.name = "p2p-queue-bytes",
       .value_name = "N",
       .default_value = std::to_string(uint64_t{1} << 30),
       .help = "point-to-point: how many bytes sent from other hosts may wait here for receives not yet posted, "
               "per communicator (a message whose receive is posted comes in regardless); over it the sending "
               "ranks wait (as NCCL's sends wait for receives), and fail when none makes room within half of "
               "--timeout-ms",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.comm.p2p_queue_bytes); }},
      {.name = "busy-poll-us",
       .value_name = "N",
       .default_note = std::to_string(kDefaultBusyPollMicros),
       .help = "how long a wait on the small-call path (a program's next request, a peer daemon's bytes) polls "
               "without blocking before it sleeps: a wake-up costs more than a short collective; 0: never",
       .set = [](DaemonSettings& s, const std::string& v) { return SetBusyPollBudget(v, &s.busy_poll_us); }},
      {.name = "peer-busy-poll-us",
       .value_name = "N",
       .default_note = std::to_string(kDefaultPeerBusyPollMicros),
       .help = "the same for a collective's transfer of up to 256 KiB waiting for a peer daemon's bytes on 4 hosts "
               "and more (a step waits for the slowest of several daemons; fewer hosts use --busy-poll-us), and for "
               "an object store call waiting for its directory shard's answer; 0: never",
       .set = [](DaemonSettings& s, const std::string& v) { return SetBusyPollBudget(v, &s.peer_busy_poll_us); }},
      {.name = "peer-congestion",
       .value_name = "NAME|host",
       .default_value = kDefaultPeerCongestion,
       .help = "TCP congestion control of the connections to other daemons (collectives, objects, RPC links); "
               "'host': the host's default (net.ipv4.tcp_congestion_control). If the kernel refuses the name, "
               "the host's default, with a warning. docs/configuration.md",
       .set = [](DaemonSettings& s, const std::string& v) {
         CONDUIT_RETURN_IF_ERROR(CheckCongestionName(v));
         s.peer_congestion = v;
         return Status::Ok();
       }},
      {.name = "shutdown-grace-ms",
       .value_name = "N",
       .default_value = "2000",
       .help = "on SIGTERM/SIGINT, how long programs have to hear why their calls fail before their connections "
               "are closed",
       .set = [](DaemonSettings& s, const std::string& v) {
         CONDUIT_RETURN_IF_ERROR(SetNumber(v, &s.shutdown_grace_ms));
         return Refused(s.shutdown_grace_ms <= 600000, "must be at most 600000 (10 minutes)");
       }},
      {.name = "log-level",
       .value_name = "debug|info|warn|error",
       .default_value = "info",
       .help = "the least severe log line written; applies at once on SIGHUP",
       .set =
           [](DaemonSettings& s, const std::string& v) {
             return Refused(ParseLogLevel(v.c_str(), &s.log_level), "must be debug, info, warn or error");
           },
       .apply_live = [](const DaemonSettings& fresh, const LiveParts&) { SetLogLevel(fresh.log_level); }},
      // Its file is re-read on every SIGHUP; a new path needs a restart.
      {.name = "topology",
       .value_name = "FILE",
       .default_note = "none",
       .help = "the operator's host/topology description (JSON, docs/topology.md); re-read on SIGHUP and POST "
               "/v1/topology/reload",
       .set = [](DaemonSettings& s, const std::string& v) { s.topology = v; return Status::Ok(); }},
      {.name = "ring-order",
       .value_name = "locality|rank",
       .default_value = "locality",
       .help = "ring order of new communicators; applies at once on SIGHUP",
       .set =
           [](DaemonSettings& s, const std::string& v) {
             Json order = Json::Object();
             order["order"] = v;
             return Refused(RingPolicy::FromJson(order, &s.ring).ok(), "must be locality or rank");
           },
       .apply_live = [](const DaemonSettings& fresh, const LiveParts& d) { d.fabric->set_ring_policy(fresh.ring); }},
      {.name = "flow-assignment",
       .value_name = "primary|single|hash|balance",
       .default_value = "balance",
       .help = "paths of collective connections; applies at once on SIGHUP",
       .set =
           [](DaemonSettings& s, const std::string& v) {
             return Refused(ParseFlowAssignment(v, &s.flows.assignment), "must be primary, single, hash or balance");
           },
       .apply_live =
           [](const DaemonSettings& fresh, const LiveParts& d) {
             // Paths reserved through the admin API stay.
             FlowPolicy flows = d.fabric->flow_policy();
             flows.assignment = fresh.flows.assignment;
             d.fabric->set_flow_policy(std::move(flows));
           }},
      {.name = "object-peers",
       .group = Group::kObjects,
       .value_name = "IP:PORT,...",
       .default_note = "none: this daemon alone",
       .help = "every daemon of the object store (this one included)",
       .set = [](DaemonSettings& s, const std::string& v) { s.object_peers = v; return Status::Ok(); }},
      {.name = "object-memory-bytes",
       .group = Group::kObjects,
       .value_name = "N",
       .default_value = std::to_string(8ull << 30),
       .help = "store size; least recently used copies that have another copy are evicted",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.memory_bytes); }},
      {.name = "object-block-bytes",
       .group = Group::kObjects,
       .value_name = "N",
       .default_value = "262144",
       .help = "pipelining block of transfers (at least 4096)",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.block_bytes); }},
      {.name = "object-store-copy-bytes",
       .group = Group::kObjects,
       .value_name = "N",
       .default_value = "4096",
       .help = "objects Put of up to N bytes are copied to every daemon (of at most 64), whose Gets then ask no shard; "
               "0: none (below 65536)",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.store_copy_bytes); }},
      {.name = "object-bandwidth-bps",
       .group = Group::kObjects,
       .value_name = "N",
       .default_note = "measured",
       .help = "reduce-degree model: link bandwidth in bytes/s",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.bandwidth_Bps); }},
      {.name = "object-latency-us",
       .group = Group::kObjects,
       .value_name = "N",
       .default_note = "measured",
       .help = "reduce-degree model: per-hop latency",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.latency_us); }},
      {.name = "object-default-access",
       .group = Group::kObjects,
       .value_name = "owner|group|world",
       .default_value = "owner",
       .help = "who may read an object whose creator did not say: its owner, also its owner's group, or every "
               "user of every host (operators always may)",
       .set = [](DaemonSettings& s, const std::string& v) {
         return Refused(objects::ParseAccess(v, &s.objects.default_access), "must be owner, group or world");
       }},
      {.name = "object-quota-bytes",
       .group = Group::kObjects,
       .value_name = "N",
       .default_note = "half of --object-memory-bytes",
       .help = "per uid: bytes of objects its programs create on this daemon (Puts, Reduce targets)",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.quota_bytes); }},
      {.name = "object-quota-objects",
       .group = Group::kObjects,
       .value_name = "N",
       .default_value = "65536",
       .help = "per uid: number of such objects; operators (root, the daemon's uid, --admin-uid) have no quota",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.objects.quota_objects); }},
      {.name = "rpc-inline-max",
       .group = Group::kRpc,
       .value_name = "N",
       .default_value = "512",
       .help = "messages up to N bytes travel inside frames, larger ones through shared memory",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.rpc_inline_max); }},
      {.name = "rpc-link-assembly-bytes",
       .group = Group::kRpc,
       .value_name = "N",
       .default_value = std::to_string(256ull << 20),
       .help = "private memory the incomplete messages of one link may hold; past it the call fails",
       .set = [](DaemonSettings& s, const std::string& v) { return SetNumber(v, &s.rpc_link_assembly_bytes); }},
      {.name = "rpc-link-version",
       .group = Group::kRpc,
       .value_name = "N",
       .default_value = std::to_string(rpcproto::kPeerLinkVersion),
       .help = "newest RPC link version offered and accepted (2: as a release without GoAway, "
               "docs/rpc-protocol.md)",
       .set = [](DaemonSettings& s, const std::string& v) {
         CONDUIT_RETURN_IF_ERROR(SetNumber(v, &s.rpc_link_version));
         return Refused(s.rpc_link_version >= rpcproto::kMinPeerLinkVersion &&
                            s.rpc_link_version <= rpcproto::kPeerLinkVersion,
                        "must be 2 or 3");
       }},
      {.name = "rpc-managed-only",
       .kind = Kind::kSwitch,
       .group = Group::kRpc,
       .default_value = "false",
       .help = "servers served through conduitd take calls only through it (no native listener for clients "
               "without the preload, so every call meets the policies)",
       .set = [](DaemonSettings& s, const std::string& v) { return SetBool(v, &s.rpc_managed_only); }},
  };
}

// Sets one setting from either source and records it as given.
Status ApplySetting(DaemonSettings& s, const SettingSpec& spec, const std::string& value) {
  CONDUIT_RETURN_IF_ERROR(spec.set(s, value));
  std::vector<std::string>& given = s.given[spec.name];
  if (spec.kind != SettingKind::kList) given.clear();
  given.push_back(value);
  return Status::Ok();
}

// One `name = value` line of a configuration file.
Status ApplyConfigEntry(const ConfigEntry& e, DaemonSettings& s) {
  if (e.name == "config") return InvalidArgument("'config' names this file; it cannot be set inside it");
  const SettingSpec* spec = FindDaemonSetting(e.name);
  if (spec == nullptr) {
    return InvalidArgument("unknown setting '%s' (the settings are conduitd's flags without '--')", e.name.c_str());
  }
  Status st = ApplySetting(s, *spec, e.value);
  return st.ok() ? st : Status(st.canonical(), e.name + ": " + st.message());
}

// Wrapped() never breaks a line here (inside "64 GiB"); it prints as a space.
constexpr char kNoBreakSpace = '\x1f';

// "64 GiB" for a byte count that is a whole number of KiB, MiB or GiB; "" otherwise.
std::string BinaryUnits(const std::string& number) {
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return "";
  const unsigned long long n = strtoull(number.c_str(), nullptr, 10);
  static const char* const kUnits[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    const unsigned long long unit = 1ull << (30 - 10 * i);
    if (n >= unit && n % unit == 0) return std::to_string(n / unit) + kNoBreakSpace + kUnits[i];
  }
  return "";
}

// `text` in lines of at most `width` characters, each after `indent`.
std::string Wrapped(const std::string& text, size_t indent, size_t width) {
  std::string out;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    pos = end + 1;
  }
  if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
  std::replace(out.begin(), out.end(), kNoBreakSpace, ' ');
  return out;
}

std::string DefaultText(const SettingSpec& spec) {
  if (!spec.default_note.empty()) return spec.default_note;
  std::string text = spec.default_value;
  const std::string units = spec.name.size() > 6 && spec.name.ends_with("-bytes") ? BinaryUnits(text) : "";
  if (!units.empty()) text += " = " + units;
  return text;
}

std::string ShowValues(const std::vector<std::string>* values) {
  if (values == nullptr) return "(default)";
  std::string out;
  for (const auto& v : *values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

}  // namespace

std::span<const SettingSpec> DaemonSettingSpecs() {
  static const std::vector<SettingSpec> specs = MakeSpecs();
  return specs;
}

const SettingSpec* FindDaemonSetting(std::string_view name) {
  for (const SettingSpec& spec : DaemonSettingSpecs()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

Status ParseCommandLine(int argc, const char* const* argv, CommandLine* out) {
  CommandLine cli;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      cli.help = true;
      break;
    }
    if (a.rfind("--take-over-fd=", 0) == 0) {
      const std::string fd = a.substr(strlen("--take-over-fd="));
      if (!SetNumber(fd, &cli.take_over_fd).ok() || cli.take_over_fd < 3) return InvalidArgument("bad --take-over-fd");
      continue;
    }
    const SettingSpec* spec = a.rfind("--", 0) == 0 ? FindDaemonSetting(std::string_view(a).substr(2)) : nullptr;
    cli.args.push_back(a);
    if (a == "--config") {
      if (i + 1 >= argc) return InvalidArgument("missing value for --config");
      cli.config = argv[++i];
      cli.args.push_back(cli.config);
    } else if (spec == nullptr) {
      return InvalidArgument("unknown flag %s", a.c_str());
    } else if (spec->kind == SettingKind::kSwitch) {
      cli.settings.emplace_back(spec, "true");
    } else {
      if (i + 1 >= argc) return InvalidArgument("missing value for %s", a.c_str());
      cli.settings.emplace_back(spec, argv[++i]);
      cli.args.push_back(argv[i]);
    }
  }
  *out = std::move(cli);
  return Status::Ok();
}

std::string DaemonUsage() {
  constexpr size_t kWidth = 96;
  std::string out =
      "usage: conduitd [--config FILE] [--SETTING VALUE | --SWITCH]...\n"
      "Every setting below is a flag here and a `name = value` line of the --config file (the name\n"
      "without --; switches take true or false there). docs/configuration.md\n"
      "  --config FILE\n" +
      Wrapped("settings from FILE (default: none): one `name = value` per line; # starts a comment; repeatable "
              "settings may repeat. Flags on the command line override the file (a repeatable flag's values "
              "replace the file's list). SIGHUP re-reads it: settings that say so apply at once, other changes "
              "are logged and need a restart",
              6, kWidth);
  const char* const kHeadings[] = {"", "object store (libhoplite):\n", "RPC service (libmrpc-grpc):\n"};
  Group group = Group::kDaemon;
  for (const SettingSpec& spec : DaemonSettingSpecs()) {
    if (spec.group != group) {
      group = spec.group;
      out += kHeadings[static_cast<int>(group)];
    }
    out += "  --" + spec.name + (spec.value_name.empty() ? "" : " " + spec.value_name) + "\n";
    out += Wrapped(spec.help + " (default " + DefaultText(spec) + ")", 6, kWidth);
  }
  return out;
}

DaemonSettings DefaultDaemonSettings() {
  DaemonSettings s;
  for (const SettingSpec& spec : DaemonSettingSpecs()) {
    std::string value = spec.default_value;
    if (!spec.default_env.empty()) {
      const char* env = getenv(spec.default_env.c_str());
      if (env != nullptr && *env != '\0') value = env;
    }
    if (value.empty()) continue;
    // The table's own defaults parse (daemon_settings_test); an environment's value that
    // does not is the file's or command line's business to replace.
    Status st = spec.set(s, value);
    if (!st.ok()) CLOG_WARN("$%s: %s; ignored", spec.default_env.c_str(), st.message().c_str());
  }
  return s;
}

Status ApplyConfigFile(const std::string& path, DaemonSettings& s) {
  return ReadConfigFile(path, [&s](const ConfigEntry& e) { return ApplyConfigEntry(e, s); });
}

Status ApplyConfigText(std::string_view text, const std::string& source, DaemonSettings& s) {
  return ParseConfigText(text, source, [&s](const ConfigEntry& e) { return ApplyConfigEntry(e, s); });
}

Status ApplyCommandLine(const CommandLine& cli, DaemonSettings& s) {
  std::set<std::string> lists_restarted;
  for (const auto& [spec, value] : cli.settings) {
    if (spec->kind == SettingKind::kList && lists_restarted.insert(spec->name).second) {
      spec->clear(s);
      s.given.erase(spec->name);
    }
    Status st = ApplySetting(s, *spec, value);
    if (!st.ok()) return Status(st.canonical(), "--" + spec->name + ": " + st.message());
  }
  return Status::Ok();
}

Status FinishDaemonSettings(DaemonSettings& s) {
  if (s.admin_socket.empty()) s.admin_socket = AdminSocketFor(s.socket_path);
  if (s.comm.timeout_ms <= 0) return InvalidArgument("timeout-ms must be positive");
  if (s.comm.chunk_bytes == 0) return InvalidArgument("chunk-bytes must be positive");
  if (s.objects.block_bytes < 4096) return InvalidArgument("object-block-bytes must be at least 4096");
  if (s.objects.store_copy_bytes >= objproto::kInlineLimit) {
    return InvalidArgument("object-store-copy-bytes must be below 65536 (larger objects do not travel inline)");
  }
  if (s.insecure_peers && !s.cluster_key.empty()) {
    return InvalidArgument("insecure-peers and cluster-key exclude each other");
  }
  if (s.encrypt_peers && s.cluster_key.empty()) return InvalidArgument("encrypt-peers needs cluster-key");
  if (s.objects.quota_objects == 0) return InvalidArgument("object-quota-objects must be positive");
  // The object store's operators are the admin API's (access.h).
  s.objects.operator_uids = s.admin.operator_uids;
  return Status::Ok();
}

Status LoadDaemonSettings(const CommandLine& cli, DaemonSettings* out) {
  DaemonSettings s = DefaultDaemonSettings();
  if (!cli.config.empty()) CONDUIT_RETURN_IF_ERROR(ApplyConfigFile(cli.config, s));
  CONDUIT_RETURN_IF_ERROR(ApplyCommandLine(cli, s));
  CONDUIT_RETURN_IF_ERROR(FinishDaemonSettings(s));
  *out = std::move(s);
  return Status::Ok();
}

void ReloadDaemonSettings(const CommandLine& cli, DaemonSettings* running, const LiveParts& daemon) {
  std::vector<std::string> applied;
  int need_restart = 0;
  if (!cli.config.empty()) {
    DaemonSettings fresh;
    Status st = LoadDaemonSettings(cli, &fresh);
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
      const SettingSpec* spec = FindDaemonSetting(name);
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

}  // namespace conduit
