// hoplite-tool: one libhoplite call per run, for tests, benchmarks and operators.
//
//   hoplite-tool put ID SIZE [--seed N] [--access owner|group|world]   object of SIZE pattern bytes (seeded)
//   hoplite-tool get ID [--readonly] [--timeout MS]
//   hoplite-tool delete ID
//   hoplite-tool reduce TARGET NUM SRC... [--op sum|prod|max|min] [--dtype float32|...] [--timeout MS]
//                                            [--access owner|group|world]
//   hoplite-tool wait NUM ID... [--timeout MS]
//   hoplite-tool state
// (kUsage below says what each does.)
// Prints one line "ok <verb> <id> size=<n> fnv=<hex> ms=<elapsed>" (or "error <code>: <msg>"
// with exit status 1). fnv is a 64-bit FNV-1a of the bytes, to compare copies across hosts.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "conduit/hoplite.h"

namespace {

uint64_t Fnv(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

void Pattern(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    if ((i & 7) == 0) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    p[i] = static_cast<uint8_t>(x >> ((i & 7) * 8));
  }
}

int Fail(const hoplite::Status& st) {
  printf("error %d: %s\n", static_cast<int>(st.code()), st.message().c_str());
  return 1;
}

const char* Opt(std::vector<std::string>& args, const char* name, const char* def) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == name) {
      static std::string v;
      v = args[i + 1];
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
      return v.c_str();
    }
  }
  return def;
}

bool Flag(std::vector<std::string>& args, const char* name) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      args.erase(args.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

constexpr char kUsage[] =
    "usage: hoplite-tool COMMAND ARGS [OPTIONS]   one call to the local conduitd's object store\n"
    "\n"
    "  put ID SIZE [--seed N] [--access A]   create object ID of SIZE bytes (a pattern from\n"
    "                                         seed N, default 1) and complete it\n"
    "  get ID [--readonly] [--timeout MS]    fetch ID, waiting up to MS for it to exist (0,\n"
    "                                         the default: the daemon's --timeout-ms);\n"
    "                                         --readonly maps it instead of copying\n"
    "  delete ID                             delete ID everywhere (its owner or an operator)\n"
    "  reduce TARGET NUM SRC... [--op OP] [--dtype T] [--timeout MS] [--access A]\n"
    "                                         TARGET = OP over the first NUM of SRC... to exist\n"
    "                                         OP: sum (default), prod, max, min; T: float32\n"
    "                                         (default), int8, uint8, int32, uint32, int64,\n"
    "                                         uint64, float16, float64, bfloat16, float8e4m3,\n"
    "                                         float8e5m2\n"
    "  wait NUM ID... [--timeout MS]         wait until NUM of the IDs exist\n"
    "  state                                 the store's state as JSON\n"
    "\n"
    "  --access owner|group|world  who may read what it creates (default: the daemon's\n"
    "                              --object-default-access)\n"
    "\n"
    "Prints one line, \"ok VERB ID size=N fnv=HEX ms=T\" (fnv: FNV-1a of the bytes, to compare\n"
    "copies across hosts), or \"error CODE: MESSAGE\" with exit status 1; exit status 2 for a\n"
    "bad command line. The daemon's socket: $CONDUIT_SOCKET, default /run/conduit/conduitd.sock.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (args.empty()) {
    fputs(kUsage, stderr);
    return 2;
  }
  const std::string verb = args[0];
  args.erase(args.begin());
  const int timeout = atoi(Opt(args, "--timeout", "0"));
  const uint64_t seed = strtoull(Opt(args, "--seed", "1"), nullptr, 10);
  const std::string opname = Opt(args, "--op", "sum");
  const std::string dtname = Opt(args, "--dtype", "float32");
  const bool readonly = Flag(args, "--readonly");
  const std::string access_name = Opt(args, "--access", "default");
  hoplite::Access access = hoplite::Access::kDefault;
  if (access_name == "owner") access = hoplite::Access::kOwner;
  else if (access_name == "group") access = hoplite::Access::kGroup;
  else if (access_name == "world") access = hoplite::Access::kWorld;
  else if (access_name != "default") return Fail(hoplite::Status(hoplite::Code::kInvalid, "bad --access"));

  // The command line is checked whole before the daemon is asked anything.
  const bool known = (verb == "put" && args.size() == 2) || (verb == "get" && args.size() == 1) ||
                     (verb == "delete" && args.size() == 1) || (verb == "reduce" && args.size() >= 3) ||
                     (verb == "wait" && args.size() >= 2) || (verb == "state" && args.empty());
  bool stray_flag = false;
  for (const std::string& a : args) stray_flag = stray_flag || a.rfind("--", 0) == 0;
  if (!known || stray_flag) {
    fprintf(stderr, "hoplite-tool: bad command line for '%s'\n\n%s", verb.c_str(), kUsage);
    return 2;
  }

  std::unique_ptr<hoplite::Client> client;
  hoplite::Status st = hoplite::Client::Connect(&client);
  if (!st.ok()) return Fail(st);
  auto t0 = std::chrono::steady_clock::now();
  auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };

  if (verb == "put" && args.size() == 2) {
    size_t size = strtoull(args[1].c_str(), nullptr, 10);
    std::vector<uint8_t> buf(size);
    Pattern(buf.data(), size, seed);
    t0 = std::chrono::steady_clock::now();
    st = client->Put(args[0], buf.data(), size, access);
    if (!st.ok()) return Fail(st);
    printf("ok put %s size=%zu fnv=%016" PRIx64 " ms=%.3f\n", args[0].c_str(), size, Fnv(buf.data(), size), ms());
  } else if (verb == "get" && args.size() == 1) {
    if (readonly) {
      std::shared_ptr<const hoplite::ObjectView> v;
      st = client->GetReadOnly(args[0], &v, timeout);
      if (!st.ok()) return Fail(st);
      double t = ms();
      printf("ok get %s size=%zu fnv=%016" PRIx64 " ms=%.3f\n", args[0].c_str(), v->size(), Fnv(v->data(), v->size()), t);
    } else {
      std::vector<uint8_t> buf;
      st = client->Get(args[0], &buf, timeout);
      if (!st.ok()) return Fail(st);
      double t = ms();
      printf("ok get %s size=%zu fnv=%016" PRIx64 " ms=%.3f\n", args[0].c_str(), buf.size(), Fnv(buf.data(), buf.size()), t);
    }
  } else if (verb == "delete" && args.size() == 1) {
    st = client->Delete(args[0]);
    if (!st.ok()) return Fail(st);
    printf("ok delete %s ms=%.3f\n", args[0].c_str(), ms());
  } else if (verb == "reduce" && args.size() >= 3) {
    static const char* kOps[] = {"sum", "prod", "max", "min"};
    static const char* kTypes[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                   "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    int op = -1, dt = -1;
    for (int i = 0; i < 4; ++i) op = opname == kOps[i] ? i : op;
    for (int i = 0; i < 12; ++i) dt = dtname == kTypes[i] ? i : dt;
    if (op < 0 || dt < 0) return Fail(hoplite::Status(hoplite::Code::kInvalid, "bad --op or --dtype"));
    std::vector<std::string> sources(args.begin() + 2, args.end());
    std::vector<size_t> used;
    st = client->Reduce(args[0], sources, strtoull(args[1].c_str(), nullptr, 10), static_cast<hoplite::ReduceOp>(op),
                        static_cast<hoplite::DataType>(dt), timeout, &used, access);
    if (!st.ok()) return Fail(st);
    double t = ms();
    std::shared_ptr<const hoplite::ObjectView> v;
    st = client->GetReadOnly(args[0], &v, timeout);
    if (!st.ok()) return Fail(st);
    std::string u;
    for (size_t i : used) u += (u.empty() ? "" : ",") + sources[i];
    printf("ok reduce %s size=%zu fnv=%016" PRIx64 " ms=%.3f used=%s\n", args[0].c_str(), v->size(),
           Fnv(v->data(), v->size()), t, u.c_str());
  } else if (verb == "wait" && args.size() >= 2) {
    std::vector<std::string> ids(args.begin() + 1, args.end());
    std::vector<size_t> ready;
    st = client->Wait(ids, strtoull(args[0].c_str(), nullptr, 10), timeout, &ready);
    if (!st.ok()) return Fail(st);
    std::string r;
    for (size_t i : ready) r += (r.empty() ? "" : ",") + ids[i];
    printf("ok wait ready=%s ms=%.3f\n", r.c_str(), ms());
  } else if (verb == "state") {
    std::string json;
    st = client->State(&json);
    if (!st.ok()) return Fail(st);
    printf("%s\n", json.c_str());
  } else {
    fprintf(stderr, "hoplite-tool: bad command line for '%s'\n\n%s", verb.c_str(), kUsage);
    return 2;
  }
  fflush(stdout);
  return 0;
}
