#include "report.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

extern char** environ;

namespace conduit::perf {
namespace {

// nccl-tests' 2.19 output is what users' scripts parse; the column widths below are
// its widths.
constexpr char kTimeFormat[] = "%Y-%m-%d %H:%M:%S";

std::string NowString() {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, kTimeFormat, &tm);
  return buf;
}

// A number in exactly `width` characters: as many decimals (2, 1, 0) as fit, then
// exponent notation.
std::string Fit(double v, int width) {
  char buf[64];
  for (int decimals = 2; decimals >= 0; --decimals) {
    if (std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, v) <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

std::string MemString(int64_t bytes) {
  double amount = static_cast<double>(bytes);
  const char* unit = " B";
  if (std::fabs(amount) >= 1024.0 * 1024 * 1024) {
    unit = " GB";
    amount /= 1024.0 * 1024 * 1024;
  } else if (std::fabs(amount) >= 1024.0 * 1024) {
    unit = " MB";
    amount /= 1024.0 * 1024;
  } else if (std::fabs(amount) >= 1024.0) {
    unit = " KB";
    amount /= 1024.0;
  }
  const int precision = std::fabs(amount) < 10 ? 2 : std::fabs(amount) < 100 ? 1 : 0;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%s", precision, amount, unit);
  return buf;
}

const char* Flag(bool b) { return b ? "true" : "false"; }  // nccl-tests writes JSON booleans as strings

}  // namespace

Report::Report(const Options& o, int nranks, std::FILE* json, int argc, char** argv)
    : o_(o), nranks_(nranks), json_file_(json) {
  if (json_file_ == nullptr) return;
  json_ = std::make_unique<JsonWriter>(json_file_);
  json_->BeginObject();
  json_->Key("version");
  json_->Int(3);
  json_->Key("start_time");
  json_->String(NowString());
  json_->Key("args");
  json_->BeginList();
  for (int i = 0; i < argc; ++i) json_->String(argv[i]);
  json_->EndList();
  // nccl-tests records the whole environment; only the variables that steer NCCL,
  // Conduit and CUDA go into a results file here, not whatever secrets a shell holds.
  json_->Key("env");
  json_->BeginList();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view var(*e);
    if (var.starts_with("NCCL_") || var.starts_with("CONDUIT_") || var.starts_with("CUDA_")) json_->String(var);
  }
  json_->EndList();
}

Report::~Report() {
  if (json_) {
    json_->Finish();
    std::fputc('\n', json_file_);
    std::fclose(json_file_);
  }
}

void Report::Preamble(int library_version, std::span<const int> local_ranks) {
  std::printf("# conduit-perf (nccl-tests flags and output) nccl-headers=%d nccl-library=%d\n", NCCL_VERSION_CODE,
              library_version);
  std::printf("# Collective test starting: %s\n", o_.program.c_str());
  const bool factor = o_.step_factor > 1;
  std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
              "validation: %d graph: %d unalign: %d\n",
              o_.threads, o_.ranks_per_thread, o_.min_bytes, o_.max_bytes, factor ? o_.step_factor : o_.step_bytes,
              factor ? "factor" : "bytes", o_.warmup_iters, o_.iters, o_.agg_iters, o_.check_iters, 0, o_.unalign);
  switch (o_.blocking) {
    case Blocking::kBarrier:
      std::printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
      break;
    case Blocking::kWait: std::printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n"); break;
    case Blocking::kOuterBarrier:
      std::printf("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
      break;
    case Blocking::kNone: break;
  }
  if (o_.per_iter_timing) {
    std::printf("# Per-Iteration Report: host clock timing; i_* uses max over ranks");
    if (o_.per_iter_skip) std::printf("; summary skips first %d iterations", o_.per_iter_skip);
    std::printf(" \n");
  }
  if (o_.parallel_init) std::printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  if (o_.time_budget_s > 0) {
    std::printf("# Time budget: at most about %g s of timed iterations per size (--time-budget)\n", o_.time_budget_s);
  }
  std::printf("#\n# Using devices\n");
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  for (int rank : local_ranks) {
    std::printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] host memory\n", rank, 0,
                static_cast<int>(getpid()), host, -1);
  }
  if (o_.multi_process()) {
    std::printf("#  (ranks of process 0 of %d; %d ranks in all)\n", o_.nranks, nranks_);
  }
  std::fflush(stdout);

  if (!json_) return;
  json_->Key("nccl_version");
  json_->Int(library_version);
  json_->Key("config");
  json_->BeginObject();
  json_->Key("nthreads");
  json_->Int(o_.threads);
  json_->Key("ngpus");
  json_->Int(o_.ranks_per_thread);
  json_->Key("minimum_bytes");
  json_->Size(o_.min_bytes);
  json_->Key("maximum_bytes");
  json_->Size(o_.max_bytes);
  json_->Key(factor ? "step_factor" : "step_bytes");
  json_->Size(factor ? o_.step_factor : o_.step_bytes);
  json_->Key("warmup_iters");
  json_->Int(o_.warmup_iters);
  json_->Key("iterations");
  json_->Int(o_.iters);
  json_->Key("aggregated_iterations");
  json_->Int(o_.agg_iters);
  json_->Key("validation");
  json_->Int(o_.check_iters);
  json_->Key("graph");
  json_->Int(0);
  json_->Key("blocking_collectives");
  json_->String(Flag(o_.blocking != Blocking::kNone));
  json_->Key("per_iter_timing");
  json_->String(Flag(o_.per_iter_timing));
  json_->Key("per_iter_skip");
  json_->Int(o_.per_iter_skip);
  json_->Key("parallel_init");
  json_->String(Flag(o_.parallel_init));
  json_->Key("devices");
  json_->BeginList();
  for (int rank : local_ranks) {
    json_->BeginObject();
    json_->Key("rank");
    json_->Int(rank);
    json_->Key("group");
    json_->Int(0);
    json_->Key("pid");
    json_->Int(getpid());
    json_->Key("hostname");
    json_->String(host);
    json_->Key("device");
    json_->Int(-1);
    json_->Key("device_hex");
    json_->String("host");
    json_->Key("device_info");
    json_->String("host memory");
    json_->EndObject();
  }
  json_->EndList();
  json_->EndObject();
}

void Report::TableHeader() {
  const char* time = o_.report_cputime ? "cputime" : "time";
  const int ts_pad = o_.report_timestamps ? 19 : 0;
  const char* ts_label = o_.report_timestamps ? "timestamp" : "";
  const char* ts_format = o_.report_timestamps ? kTimeFormat : "";
  std::printf("#\n");
  if (o_.per_iter_timing) {
    std::printf("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)"
                "                                in-place (+ per-iteration)\n",
                "", "", "", "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                "%7s  %7s %*s\n",
                "size", "count", "type", "redop", "root", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
                "i_cv%", time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", ts_pad, ts_label);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
                "%7s  %7s %*s\n",
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", ts_pad, ts_format);
  } else {
    std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
                "", "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
                "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw", "#wrong", ts_pad, ts_label);
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts_pad, ts_format);
  }
  std::fflush(stdout);
  if (json_) {
    json_->Key("results");
    json_->BeginList();
  }
}

void Report::Note(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Report::Half(size_t bytes, const Measurement& m, bool out_of_place) {
  // GB/s are 1e9 bytes per second, as in nccl-tests.
  const double sec = m.time_us * 1e-6;
  const double algbw = sec > 0 ? static_cast<double>(bytes) * AlgBwFactor(o_.coll->coll, nranks_) / sec / 1e9 : 0;
  const double busbw = algbw * BusBwFactor(o_.coll->coll, nranks_);
  busbw_sum_ += busbw;
  ++busbw_n_;
  if (m.checked && m.wrong > 0) ++failed_;
  const std::string t = Fit(m.time_us, 7), a = Fit(algbw, 6), b = Fit(busbw, 6);
  if (m.checked) std::printf("  %7s  %6s  %6s  %6g", t.c_str(), a.c_str(), b.c_str(), static_cast<double>(m.wrong));
  else std::printf("  %7s  %6s  %6s    N/A", t.c_str(), a.c_str(), b.c_str());
  const IterStats& st = m.per_iter;
  if (o_.per_iter_timing) {
    const double cv = st.avg_us > 0 ? st.stdev_us / st.avg_us * 100 : 0;
    std::printf("  %7s  %7s  %7s  %7s", Fit(st.min_us, 7).c_str(), Fit(st.max_us, 7).c_str(),
                Fit(st.p99_us, 7).c_str(), Fit(cv, 7).c_str());
  }
  if (!json_) return;
  json_->Key(out_of_place ? "out_of_place" : "in_place");
  json_->BeginObject();
  json_->Key(o_.report_cputime ? "cpu_time" : "time");
  json_->Double(m.time_us);
  json_->Key("alg_bw");
  json_->Double(algbw);
  json_->Key("bus_bw");
  json_->Double(busbw);
  json_->Key("nwrong");
  if (m.checked) json_->Double(static_cast<double>(m.wrong));
  else json_->Null();
  json_->EndObject();
  if (!o_.per_iter_timing) return;
  json_->Key(out_of_place ? "out_of_place_per_iter" : "in_place_per_iter");
  json_->BeginObject();
  json_->Key("skipped_iterations");
  json_->Int(o_.per_iter_skip);
  const std::pair<const char*, double> stats[] = {
      {"min_us", st.min_us}, {"max_us", st.max_us}, {"avg_us", st.avg_us},     {"p50_us", st.p50_us},
      {"p95_us", st.p95_us}, {"p99_us", st.p99_us}, {"stdev_us", st.stdev_us},
      {"cv_pct", st.avg_us > 0 ? st.stdev_us / st.avg_us * 100 : 0},
  };
  for (const auto& [key, value] : stats) {
    json_->Key(key);
    json_->Double(value);
  }
  json_->Key("times_us");
  json_->BeginList();
  for (double t_us : st.times_us) json_->Double(t_us);
  json_->EndList();
  json_->EndObject();
}

void Report::Row(const Shape& shape, const Case& c, const Measurement& out_of_place, const Measurement& in_place) {
  const char* op = o_.coll->uses_redop ? c.op->name : "none";
  const int root = o_.coll->uses_root ? c.root : -1;
  std::printf("%12zu  %12zu  %8s  %6s  %6d", shape.bytes, shape.count, c.dtype->name, op, root);
  char root_str[16];
  std::snprintf(root_str, sizeof root_str, "%6d", root);
  if (json_) {
    json_->BeginObject();
    json_->Key("size");
    json_->Size(shape.bytes);
    json_->Key("count");
    json_->Size(shape.count);
    json_->Key("type");
    json_->String(c.dtype->name);
    json_->Key("redop");
    json_->String(op);
    json_->Key("root");
    json_->String(root_str);  // nccl-tests writes the padded column text
  }
  Half(shape.bytes, out_of_place, true);
  Half(shape.bytes, in_place, false);
  if (o_.report_timestamps) std::printf("%21s", NowString().c_str());
  std::printf("\n");
  std::fflush(stdout);
  if (json_) {
    json_->Key("actual_iterations");
    json_->Int(in_place.iters);
    json_->Key("experiment_name");
    json_->String("");
    json_->EndObject();
    std::fflush(json_file_);
  }
}

bool Report::Footer(const MemoryUsage* memory) {
  const double avg = busbw_n_ ? busbw_sum_ / busbw_n_ : 0.0;
  // NCCL_TESTS_MIN_BW: nccl-tests fails the run when the average bus bandwidth is
  // below 90% of it.
  const char* env = std::getenv("NCCL_TESTS_MIN_BW");
  const double min_bw = env != nullptr ? std::atof(env) : -1;
  const bool bw_ok = min_bw == -1 || avg >= min_bw * 0.9;
  if (json_) {
    json_->EndList();  // results
  }
  std::printf("# %-20s : %d %s\n", "Out of bounds values", failed_, failed_ ? "FAILED" : "OK");
  std::printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, min_bw == -1 ? "" : bw_ok ? "OK" : "FAILED");
  std::printf("#\n# Collective test concluded: %s\n", o_.program.c_str());
  if (memory != nullptr) {
    const int64_t total = memory->init_bytes + memory->buffer_bytes + memory->collective_bytes;
    std::printf("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n", "Host memory usage",
                MemString(memory->init_bytes).c_str(), MemString(memory->buffer_bytes).c_str(),
                MemString(memory->collective_bytes).c_str(), MemString(total).c_str());
  }
  std::printf("#\n");
  std::fflush(stdout);
  if (json_) {
    json_->Key("out_of_bounds");
    json_->BeginObject();
    json_->Key("count");
    json_->Int(failed_);
    json_->Key("okay");
    json_->String(Flag(failed_ == 0));
    json_->EndObject();
    json_->Key("average_bus_bandwidth");
    json_->BeginObject();
    json_->Key("bandwidth");
    json_->Double(avg);
    json_->Key("okay");
    json_->String(min_bw == -1 ? "unchecked" : Flag(bw_ok));
    json_->EndObject();
    json_->Key("errors");
    json_->BeginList();
    json_->EndList();
    json_->Key("end_time");
    json_->String(NowString());
  }
  return failed_ == 0 && bw_ok;
}

}  // namespace conduit::perf
