// conduitctl: the operator's command line for conduitd's admin API (docs/admin-api.md).
//
// Exit status: 0 success, 1 the daemon answered with an error, 2 bad usage, 3 the daemon
// could not be reached.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "admin/admin_socket.h"
#include "admin_client.h"
#include "common/json.h"
#include "render.h"
#include "security/cluster_key.h"

namespace conduit {
namespace {

constexpr char kUsage[] =
    "usage: conduitctl [--socket PATH] [--json] [--timeout-ms N] COMMAND [ARGS]\n"
    "\n"
    "  status                       the daemon: version, uptime, addresses, connections\n"
    "  programs                     programs connected to the daemon\n"
    "  comms                        communicators with ranks on this host\n"
    "  comm KEY                     one communicator\n"
    "  trace KEY [--limit N]        its most recent collectives (sequence, epoch, ring, op, time)\n"
    "  reconfigure KEY [--ring R] [--algorithm A] [--paths policy|A-B=K,...] [--wait-ms N]\n"
    "                               switch a running communicator between two collectives;\n"
    "                               R: locality|rank|reverse|H,H,... (host indices in ring order),\n"
    "                               A: auto|ring|rd|rh, K: a topology path index (-1: primary)\n"
    "  topology [set JSON|@FILE | reload]  the host/topology description\n"
    "  paths                        this daemon's collective connections per path\n"
    "  metrics                      Prometheus text metrics\n"
    "  routes                       every admin endpoint\n"
    "  policy get KIND [NAME]       show the policies of a kind (all of them, or one by NAME)\n"
    "  policy set KIND [NAME] JSON  set one; JSON is the text itself or @FILE (a file holding it)\n"
    "  policy rm KIND [NAME]        remove one\n"
    "  upgrade [BINARY] [--wait-ms N] [--drain-ms N]\n"
    "                               replace the daemon by a new process (default: the binary\n"
    "                               it was started from, e.g. after a package upgrade) without\n"
    "                               closing its sockets; programs, policies and state carry over;\n"
    "                               --drain-ms: how long sessions and links get to stop between\n"
    "                               two requests (default 3000; calls wait meanwhile) (docs/upgrade.md)\n"
    "  raw METHOD PATH [JSON]       any request, e.g. raw GET /v1/status\n"
    "  keygen FILE                  write a new cluster key (mode 0600) for conduitd --cluster-key;\n"
    "                               copy the same file to every host (talks to no daemon)\n"
    "\n"
    "Policy kinds and their JSON (docs/admin-api.md has every field):\n"
    "  admission            {\"deny_exe\": [\"NAME\", ...]}: programs refused from now on\n"
    "  ring                 {\"order\": \"locality\" | \"rank\"}: ring order of new communicators\n"
    "  flows                {\"assignment\": \"primary\"|\"single\"|\"hash\"|\"balance\",\n"
    "                        \"reserve\": [{\"path\": K, \"min_priority\": P}]}\n"
    "  tenant NAME          {\"match\": {\"exe\": E, \"comm\": KEY-PREFIX}, \"priority\": P,\n"
    "                        \"max_mbit_per_s\": N, \"yield\": true|false, \"yield_max_ms\": N}\n"
    "  rpc-acl NAME         {\"service\": S, \"method\": M, \"field\": F, \"allow\"|\"deny\": [V, ...],\n"
    "                        \"descriptor_set_file\": PATH, \"side\": \"client\"|\"server\"|\"both\"}\n"
    "  rpc-ratelimit NAME   {\"service\": S, \"method\": M, \"rate\": N|\"inf\", \"burst\": N,\n"
    "                        \"on_limit\": \"wait\"|\"reject\", \"max_wait_ms\": N, \"side\": ...}\n"
    "  rpc-qos              {\"small_bytes\": N}: messages up to N bytes go first on daemon links\n"
    "  rpc-metrics          {}: per-method RPC metrics on (rm: off)\n"
    "e.g. conduitctl policy set rpc-acl no-guests @rule.json\n"
    "\n"
    "The admin socket: --socket, else $CONDUIT_ADMIN_SOCKET, else the one next to\n"
    "$CONDUIT_SOCKET (default /run/conduit/conduitd-admin.sock).\n";

// On stdout with exit 0 when asked for (--help), on stderr with exit 2 after a mistake.
[[noreturn]] void Usage(const std::string& why, bool asked = false) {
  if (!why.empty()) fprintf(stderr, "conduitctl: %s\n\n", why.c_str());
  fputs(kUsage, asked ? stdout : stderr);
  exit(asked ? 0 : 2);
}

// "@file" reads the file; anything else is the JSON text itself. Checked locally so a
// typo gets a precise message before anything is sent.
std::string BodyArg(const std::string& arg) {
  std::string text = arg;
  if (!arg.empty() && arg[0] == '@') {
    std::ifstream in(arg.substr(1));
    if (!in) Usage("cannot read " + arg.substr(1));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  Json parsed;
  Status st = Json::Parse(text, &parsed);
  if (!st.ok()) Usage("the request body is not JSON: " + st.message());
  return text;
}

// The reconfigure request body from flags: --ring, --algorithm, --paths, --wait-ms.
std::string ReconfigureBody(const std::vector<std::string>& args) {
  Json body = Json::Object();
  for (size_t i = 2; i < args.size(); i += 2) {
    if (i + 1 >= args.size()) Usage(args[i] + " needs a value");
    const std::string& flag = args[i];
    const std::string& v = args[i + 1];
    if (flag == "--ring") {
      if (v == "locality" || v == "rank" || v == "reverse") {
        body["ring"] = v;
      } else {
        Json ring = Json::Array();
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) {
          char* end = nullptr;
          long h = strtol(item.c_str(), &end, 10);
          if (item.empty() || *end != '\0') Usage("--ring takes locality, rank, reverse or host indices like 0,2,1,3");
          ring.push_back(static_cast<int>(h));
        }
        body["ring"] = std::move(ring);
      }
    } else if (flag == "--algorithm") {
      body["algorithm"] = v;
    } else if (flag == "--paths") {
      if (v == "policy") {
        body["paths"] = v;
      } else {
        // A-B=K,...
        Json pins = Json::Array();
        std::stringstream ss(v);
        std::string item;
        while (std::getline(ss, item, ',')) {
          int a, b, k;
          char tail;
          if (sscanf(item.c_str(), "%d-%d=%d%c", &a, &b, &k, &tail) != 3) Usage("--paths takes policy or A-B=K,...");
          Json pin = Json::Object();
          Json hosts = Json::Array();
          hosts.push_back(a);
          hosts.push_back(b);
          pin["hosts"] = std::move(hosts);
          pin["path"] = k;
          pins.push_back(std::move(pin));
        }
        body["paths"] = std::move(pins);
      }
    } else if (flag == "--wait-ms") {
      char* end = nullptr;
      long ms = strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || ms < 0) Usage("--wait-ms takes milliseconds");
      body["wait_ms"] = static_cast<int>(ms);
    } else {
      Usage("reconfigure KEY [--ring R] [--algorithm A] [--paths policy|A-B=K,...] [--wait-ms N]");
    }
  }
  if (body.size() == 0) Usage("reconfigure needs --ring, --algorithm and/or --paths");
  return body.Dump();
}

struct Request {
  std::string method = "GET";
  std::string target;
  std::string body;
  Render render = Render::kJson;
  int wait_ms = 0;  // how long the daemon may take to answer, beyond --timeout-ms
};

Request Build(const std::vector<std::string>& args) {
  if (args.empty()) Usage("missing command");
  const std::string& cmd = args[0];
  auto need = [&](size_t n) {
    if (args.size() < n) Usage("'" + cmd + "' needs more arguments");
  };
  Request r;
  if (cmd == "status") {
    r.target = "/v1/status";
  } else if (cmd == "programs") {
    r.target = "/v1/programs";
    r.render = Render::kPrograms;
  } else if (cmd == "comms") {
    r.target = "/v1/communicators";
    r.render = Render::kComms;
  } else if (cmd == "comm") {
    need(2);
    r.target = "/v1/communicators/" + PercentEncode(args[1]);
  } else if (cmd == "trace") {
    need(2);
    r.target = "/v1/communicators/" + PercentEncode(args[1]) + "/trace";
    if (args.size() >= 4 && args[2] == "--limit") r.target += "?limit=" + PercentEncode(args[3]);
    else if (args.size() > 2) Usage("trace KEY [--limit N]");
    r.render = Render::kTrace;
  } else if (cmd == "reconfigure") {
    need(2);
    r.method = "POST";
    r.target = "/v1/communicators/" + PercentEncode(args[1]) + "/reconfigure";
    r.body = ReconfigureBody(args);
  } else if (cmd == "topology") {
    r.target = "/v1/topology";
    if (args.size() >= 2 && args[1] == "reload") {
      r.method = "POST";
      r.target = "/v1/topology/reload";
    } else if (args.size() == 3 && args[1] == "set") {
      r.method = "PUT";
      r.body = BodyArg(args[2]);
    } else if (args.size() != 1) {
      Usage("topology [set JSON|@FILE | reload]");
    }
  } else if (cmd == "paths") {
    r.target = "/v1/paths";
    r.render = Render::kPaths;
  } else if (cmd == "metrics") {
    r.target = "/metrics";
    r.render = Render::kText;
  } else if (cmd == "routes") {
    r.target = "/v1";
    r.render = Render::kRoutes;
  } else if (cmd == "policy") {
    need(3);
    const std::string& verb = args[1];
    std::string path = "/v1/policies/" + PercentEncode(args[2]);
    if (verb == "get") {
      if (args.size() > 3) path += "/" + PercentEncode(args[3]);
      r.target = path;
    } else if (verb == "set") {
      need(4);
      if (args.size() == 5) path += "/" + PercentEncode(args[3]);
      r.method = "PUT";
      r.target = path;
      r.body = BodyArg(args.back());
    } else if (verb == "rm") {
      // Named kinds (tenant, rpc-acl, rpc-ratelimit) take NAME; rpc-qos and rpc-metrics do not.
      if (args.size() > 4) Usage("policy rm KIND [NAME]");
      r.method = "DELETE";
      r.target = args.size() == 4 ? path + "/" + PercentEncode(args[3]) : path;
    } else {
      Usage("policy get|set|rm");
    }
  } else if (cmd == "upgrade") {
    r.method = "POST";
    r.target = "/v1/upgrade";
    Json body = Json::Object();
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--wait-ms" && i + 1 < args.size()) {
        char* end = nullptr;
        const long ms = strtol(args[++i].c_str(), &end, 10);
        if (*end != '\0' || ms < 1000 || ms > 600000) Usage("--wait-ms must be 1000..600000");
        body["timeout_ms"] = static_cast<int64_t>(ms);
        r.wait_ms = static_cast<int>(ms);
      } else if (args[i] == "--drain-ms" && i + 1 < args.size()) {
        char* end = nullptr;
        const long ms = strtol(args[++i].c_str(), &end, 10);
        if (*end != '\0' || ms < 100 || ms > 120000) Usage("--drain-ms must be 100..120000");
        body["drain_ms"] = static_cast<int64_t>(ms);
      } else if (args[i][0] != '-' && body.find("binary") == nullptr) {
        body["binary"] = args[i];
      } else {
        Usage("upgrade [BINARY] [--wait-ms N] [--drain-ms N]");
      }
    }
    r.body = body.Dump();
  } else if (cmd == "raw") {
    need(3);
    r.method = args[1];
    r.target = args[2];
    if (args.size() > 3) r.body = BodyArg(args[3]);
    r.render = r.target == "/metrics" ? Render::kText : Render::kJson;
  } else {
    Usage("unknown command '" + cmd + "'");
  }
  return r;
}

int Main(int argc, char** argv) {
  std::string socket = DefaultAdminSocket();
  bool json = false;
  int timeout_ms = 10000;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--socket" && i + 1 < argc) socket = argv[++i];
    else if (a == "--json") json = true;
    else if (a == "--timeout-ms" && i + 1 < argc) timeout_ms = atoi(argv[++i]);
    else if (a == "-h" || a == "--help") Usage("", /*asked=*/true);
    else args.push_back(a);
  }
  if (timeout_ms <= 0) Usage("--timeout-ms must be positive");
  if (!args.empty() && args[0] == "keygen") {
    if (args.size() != 2) Usage("keygen FILE");
    Status made = WriteNewClusterKeyFile(args[1]);
    if (!made.ok()) {
      fprintf(stderr, "conduitctl: %s\n", made.message().c_str());
      return 1;
    }
    ClusterKey key;
    Status loaded = LoadClusterKey(args[1], &key);
    if (loaded.ok()) printf("wrote cluster key %s (key id %s)\n", args[1].c_str(), key.id.c_str());
    return loaded.ok() ? 0 : 1;
  }
  Request req = Build(args);
  // An upgrade answers once the new daemon serves (60 s at most by default).
  if (req.target == "/v1/upgrade") timeout_ms = std::max(timeout_ms, (req.wait_ms > 0 ? req.wait_ms : 60000) + 5000);
  AdminClient client(socket, timeout_ms);
  HttpResponse resp;
  Status st = client.Call(req.method, req.target, req.body, &resp);
  if (!st.ok()) {
    fprintf(stderr, "conduitctl: %s\n", st.message().c_str());
    return 3;
  }
  if (resp.status < 200 || resp.status >= 300) {
    fprintf(stderr, "conduitctl: %s %s: %s\n", req.method.c_str(), req.target.c_str(), ErrorText(resp).c_str());
    return 1;
  }
  std::string out = RenderBody(json ? Render::kJson : req.render, resp.body);
  fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
