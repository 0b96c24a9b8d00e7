// hoplite-bench: times libhoplite collectives the way the Hoplite chapter measures them.
//
//   hoplite-bench --sockets S0,S1,... --op bcast|gather|reduce|allreduce --sizes 1K,1M,...
//                 [--iters N] [--prefix ID] [--gap-ms G] [--verbose 1 (every run's time on stderr)]
// One "program" per host: host i's calls go to the daemon behind socket Si (each thread
// its own client). All namespaces share this machine's clock, so one process can time a
// collective across hosts. Inputs are Put (and complete) before the clock starts, and the
// threads that play the hosts are started (and connected) before it too.
//   bcast:     host 0 Puts; hosts 1.. Get (read-only) at once; until the last has it.
//   gather:    every host Puts; host 0 Gets (read-only) every other object at once.
//   reduce:    every host Puts; host 0 Reduces all (float32 sum) and Gets the result.
//   allreduce: every host Puts; host 0 Reduces, the others Get the result; until the last.
// Before every run the hosts are idle for G ms (default 20; 15 G from 64 MiB, time for the
// last run's copies to be freed): the OpenMPI, Gloo and Ray drivers of objects_bench.sh take
// the same --gap-ms, so that every system starts each run from the same idle state.
// Prints "op hosts size_bytes iters median_ms min_ms" per size.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/number_arg.h"
#include "cli/size_arg.h"
#include "cli/usage.h"
#include "conduit/hoplite.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t c = s.find(',', start);
    if (c == std::string::npos) c = s.size();
    if (c > start) out.push_back(s.substr(start, c - start));
    start = c + 1;
  }
  return out;
}

[[noreturn]] void Die(const std::string& what, const hoplite::Status& st) {
  fprintf(stderr, "hoplite-bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  exit(1);
}

struct Bench {
  std::vector<std::string> sockets;
  std::string op, prefix = "hb";
  int gap_ms = 20;
  std::vector<uint8_t> buf;  // the input every host Puts (float32 ones, so sums are exact)

  std::unique_ptr<hoplite::Client> Connect(int h) {
    std::unique_ptr<hoplite::Client> c;
    hoplite::Status st = hoplite::Client::Connect(&c, sockets[h]);
    if (!st.ok()) Die("connect to " + sockets[h], st);
    return c;
  }

  // One timed run; returns milliseconds.
  double Run(size_t size, int iter) {
    const int n = static_cast<int>(sockets.size());
    const std::string tag = prefix + "-" + op + "-" + std::to_string(size) + "-" + std::to_string(iter);
    std::vector<std::unique_ptr<hoplite::Client>> clients;
    for (int h = 0; h < n; ++h) clients.push_back(Connect(h));
    std::vector<std::string> ids;
    std::vector<std::string> to_delete;
    auto put = [&](int h, const std::string& id) {
      hoplite::Status st = clients[h]->Put(id, buf.data(), size);
      if (!st.ok()) Die("put " + id, st);
      to_delete.push_back(id);
    };
    if (op == "bcast") {
      put(0, tag);
    } else {
      for (int h = 0; h < n; ++h) {
        ids.push_back(tag + "-s" + std::to_string(h));
        put(h, ids.back());
      }
    }
    const std::string target = tag + "-r";
    // Every worker thread gets its own client, connected before the clock starts.
    std::vector<std::unique_ptr<hoplite::Client>> workers;
    std::vector<std::function<void(hoplite::Client&)>> jobs;
    auto get_ro = [](const std::string& id) {
      return [id](hoplite::Client& c) {
        std::shared_ptr<const hoplite::ObjectView> v;
        hoplite::Status st = c.GetReadOnly(id, &v, 600000);
        if (!st.ok()) Die("get " + id, st);
      };
    };
    std::vector<int> where;
    if (op == "bcast") {
      for (int h = 1; h < n; ++h) where.push_back(h), jobs.push_back(get_ro(tag));
    } else if (op == "gather") {
      for (int h = 1; h < n; ++h) where.push_back(0), jobs.push_back(get_ro(ids[h]));
    } else if (op == "reduce" || op == "allreduce") {
      where.push_back(0);
      jobs.push_back([&, target](hoplite::Client& c) {
        hoplite::Status st = c.Reduce(target, ids, ids.size(), hoplite::ReduceOp::kSum, hoplite::DataType::kFloat32, 600000);
        if (!st.ok()) Die("reduce " + target, st);
        get_ro(target)(c);
      });
      if (op == "allreduce") {
        for (int h = 1; h < n; ++h) where.push_back(h), jobs.push_back(get_ro(target));
      }
    } else {
      fprintf(stderr, "hoplite-bench: unknown --op %s\n", op.c_str());
      exit(2);
    }
    for (int h : where) workers.push_back(Connect(h));
    // Every job but the first gets a thread that is running before the clock starts and
    // waits for the start flag (yielding, as MPI ranks leaving a barrier); the first job
    // runs on this thread. Thread creation is not part of the collective.
    std::vector<Clock::time_point> done(jobs.size());
    std::vector<std::thread> threads;
    std::atomic<int> waiting{0};
    std::atomic<bool> go{false};
    for (size_t j = 1; j < jobs.size(); ++j) {
      threads.emplace_back([&, j] {
        ++waiting;
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        jobs[j](*workers[j]);
        done[j] = Clock::now();
      });
    }
    while (waiting.load() < static_cast<int>(threads.size())) std::this_thread::yield();
    const Clock::time_point start = Clock::now();
    go.store(true, std::memory_order_release);
    jobs[0](*workers[0]);
    done[0] = Clock::now();
    for (auto& t : threads) t.join();
    double ms = std::chrono::duration<double, std::milli>(*std::max_element(done.begin(), done.end()) - start).count();
    if (op == "reduce" || op == "allreduce") to_delete.push_back(target);
    workers.clear();
    for (const auto& id : to_delete) (void)clients[0]->Delete(id);
    std::this_thread::sleep_for(std::chrono::milliseconds(size >= (64u << 20) ? 15 * gap_ms : gap_ms));
    return ms;
  }
};

}  // namespace

constexpr char kUsage[] =
    "usage: hoplite-bench --sockets S0,S1,... --op bcast|gather|reduce|allreduce --sizes 1K,1M\n"
    "                     [--iters N] [--prefix P] [--gap-ms G] [--verbose 1]\n"
    "one libhoplite collective per size across the daemons at the given sockets (one per host,\n"
    "host 0 the root); tools/bench/objects_bench.sh runs it\n";

int main(int argc, char** argv) {
  conduit::tools::ExitWithUsageIfAsked(argc, argv, kUsage);
  Bench b;
  std::vector<size_t> sizes;
  int iters = 0;
  bool verbose = false;
  auto bad = [](const std::string& flag, const std::string& value, const char* want) {
    fprintf(stderr, "hoplite-bench: %s '%s': %s\n%s", flag.c_str(), value.c_str(), want, kUsage);
    return 2;
  };
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (i + 1 >= argc) return bad(a, "", "needs a value");
    std::string v = argv[i + 1];
    int64_t n = 0;
    if (a == "--sockets") {
      b.sockets = Split(v);
    } else if (a == "--op") {
      b.op = v;
    } else if (a == "--sizes") {
      for (auto& s : Split(v)) {
        size_t bytes = 0;
        // An object holds at most 4 GiB here (libhoplite's own limit is the store's size).
        if (!conduit::tools::ParseSizeArg(s.c_str(), &bytes) || bytes == 0 || bytes > (size_t{4} << 30)) {
          return bad(a, s, "a size from 1 byte to 4G");
        }
        sizes.push_back(bytes);
      }
    } else if (a == "--iters") {
      if (!conduit::tools::ParseIntArg(v.c_str(), 1, 1000000, &n)) return bad(a, v, "a count from 1 to 1000000");
      iters = static_cast<int>(n);
    } else if (a == "--prefix") {
      b.prefix = v;
    } else if (a == "--gap-ms") {
      if (!conduit::tools::ParseIntArg(v.c_str(), 0, 60000, &n)) return bad(a, v, "milliseconds from 0 to 60000");
      b.gap_ms = static_cast<int>(n);
    } else if (a == "--verbose") {
      if (v != "0" && v != "1") return bad(a, v, "0 or 1");
      verbose = v == "1";
    } else {
      fprintf(stderr, "hoplite-bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (b.sockets.size() < 2 || b.op.empty() || sizes.empty()) {
    fputs(kUsage, stderr);
    return 2;
  }
  for (size_t size : sizes) {
    size_t floats = (size + 3) / 4;
    b.buf.assign(floats * 4, 0);
    std::vector<float> ones(floats, 1.0f);
    memcpy(b.buf.data(), ones.data(), floats * 4);
    int n = iters > 0 ? iters : size <= (64u << 10) ? 50 : size <= (1u << 20) ? 10 : size <= (64u << 20) ? 3 : 1;
    int warm = size <= (64u << 20) ? 1 : 0;
    std::vector<double> t;
    for (int i = 0; i < warm + n; ++i) {
      double ms = b.Run(size, i);
      if (i >= warm) t.push_back(ms);
      if (verbose) fprintf(stderr, "%s %zu run %d: %.3f ms%s\n", b.op.c_str(), size, i, ms, i < warm ? " (warmup)" : "");
    }
    std::sort(t.begin(), t.end());
    printf("%s %zu %zu %d %.3f %.3f\n", b.op.c_str(), b.sockets.size(), size, n, t[t.size() / 2], t[0]);
    fflush(stdout);
  }
  return 0;
}
