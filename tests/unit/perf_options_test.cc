// conduit-perf's command line (tools/perf/options.h): nccl-tests' flags with
// nccl-tests' meanings and defaults, `all` values, the collective picked by the
// program's name, and what is refused.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "options.h"

namespace conduit::perf {
namespace {

// getopt_long permutes argv and keeps pointers into it: the strings must outlive
// the call and be writable.
class Argv {
 public:
  Argv(std::initializer_list<std::string> args) : strings_(args) {
    for (std::string& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(strings_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

ParseResult Parse(std::initializer_list<std::string> args) {
  Argv a(args);
  return ParseOptions(a.argc(), a.argv());
}

Options Ok(std::initializer_list<std::string> args) {
  ParseResult r = Parse(args);
  EXPECT_EQ(r.outcome, ParseOutcome::kRun) << r.message;
  return r.options;
}

// The message of a refused command line (and that it was refused).
std::string Refused(std::initializer_list<std::string> args) {
  ParseResult r = Parse(args);
  EXPECT_EQ(r.outcome, ParseOutcome::kError);
  EXPECT_FALSE(r.message.empty());
  return r.message;
}

std::vector<std::string> Names(const std::vector<const RedOpInfo*>& ops) {
  std::vector<std::string> out;
  for (const RedOpInfo* o : ops) out.push_back(o->name);
  return out;
}

std::vector<std::string> Names(const std::vector<const DtypeInfo*>& types) {
  std::vector<std::string> out;
  for (const DtypeInfo* t : types) out.push_back(t->name);
  return out;
}

TEST(PerfOptions, DefaultsAreNcclTests) {
  const Options o = Ok({"conduit-perf"});
  EXPECT_STREQ(o.coll->name, "all_reduce");
  EXPECT_EQ(o.threads, 1);
  EXPECT_EQ(o.ranks_per_thread, 1);
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.agg_iters, 1);
  EXPECT_EQ(o.warmup_iters, 1);
  EXPECT_EQ(o.run_cycles, 1);
  EXPECT_FALSE(o.parallel_init);
  EXPECT_EQ(o.check_iters, 1);
  EXPECT_EQ(Names(o.ops), std::vector<std::string>{"sum"});
  EXPECT_EQ(Names(o.dtypes), std::vector<std::string>{"float"});
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.blocking, Blocking::kNone);
  EXPECT_FALSE(o.stream_null);
  EXPECT_EQ(o.timeout_s, 0);
  EXPECT_FALSE(o.report_cputime);
  EXPECT_FALSE(o.report_timestamps);
  EXPECT_TRUE(o.output_file.empty());
  EXPECT_EQ(o.average, Average::kMean);
  EXPECT_EQ(o.local_register, 0);
  EXPECT_EQ(o.cta_policy, -1);
  EXPECT_EQ(o.device_cta_count, 16);
  EXPECT_FALSE(o.memory_report);
  EXPECT_EQ(o.unalign, 0);
  EXPECT_FALSE(o.per_iter_timing);
  EXPECT_EQ(o.per_iter_skip, 0);
  EXPECT_EQ(o.time_budget_s, 0);  // exactly -n iterations, as nccl-tests
  EXPECT_EQ(o.hold_ms, 0);
  EXPECT_EQ(o.read_result, 0);
  EXPECT_FALSE(o.multi_process());
  EXPECT_TRUE(o.warnings.empty());
}

TEST(PerfOptions, EveryShortFlag) {
  const Options o = Ok({"conduit-perf",
                        "-t",
                        "3",
                        "-g",
                        "2",
                        "-b",
                        "8",
                        "-e",
                        "128M",
                        "-i",
                        "4K",
                        "-f",
                        "2",
                        "-n",
                        "7",
                        "-m",
                        "3",
                        "-w",
                        "4",
                        "-N",
                        "5",
                        "-p",
                        "1",
                        "-c",
                        "2",
                        "-o",
                        "max",
                        "-d",
                        "int32",
                        "-r",
                        "5",
                        "-z",
                        "3",
                        "-y",
                        "1",
                        "-T",
                        "9",
                        "-G",
                        "0",
                        "-C",
                        "1",
                        "-S",
                        "1",
                        "-J",
                        "out.json",
                        "-a",
                        "3",
                        "-R",
                        "1",
                        "-x",
                        "2",
                        "-D",
                        "0",
                        "-V",
                        "32",
                        "-M",
                        "1",
                        "-u",
                        "3",
                        "-I",
                        "1",
                        "-K",
                        "2"});
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.ranks_per_thread, 2);
  EXPECT_EQ(o.local_ranks(), 6);
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 128u << 20);
  EXPECT_EQ(o.step_bytes, 4096u);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.agg_iters, 3);
  EXPECT_EQ(o.warmup_iters, 4);
  EXPECT_EQ(o.run_cycles, 5);
  EXPECT_TRUE(o.parallel_init);
  EXPECT_EQ(o.check_iters, 2);
  EXPECT_EQ(Names(o.ops), std::vector<std::string>{"max"});
  EXPECT_EQ(Names(o.dtypes), std::vector<std::string>{"int32"});
  EXPECT_EQ(o.root, 5);
  EXPECT_EQ(o.blocking, Blocking::kOuterBarrier);
  EXPECT_TRUE(o.stream_null);
  EXPECT_EQ(o.timeout_s, 9);
  EXPECT_TRUE(o.report_cputime);
  EXPECT_TRUE(o.report_timestamps);
  EXPECT_EQ(o.output_file, "out.json");
  EXPECT_EQ(o.average, Average::kMax);
  EXPECT_EQ(o.local_register, 1);
  EXPECT_EQ(o.cta_policy, 2);
  EXPECT_EQ(o.device_cta_count, 32);
  EXPECT_TRUE(o.memory_report);
  EXPECT_EQ(o.unalign, 3);
  EXPECT_TRUE(o.per_iter_timing);
  EXPECT_EQ(o.per_iter_skip, 2);
  EXPECT_TRUE(o.warnings.empty());
}

TEST(PerfOptions, EveryLongFlag) {
  const Options o = Ok({"conduit-perf",
                        "--nthreads",
                        "2",
                        "--ngpus",
                        "3",
                        "--minbytes",
                        "1K",
                        "--maxbytes",
                        "1G",
                        "--stepbytes",
                        "512",
                        "--stepfactor",
                        "4",
                        "--iters",
                        "11",
                        "--agg_iters",
                        "2",
                        "--warmup_iters",
                        "0",
                        "--run_cycles",
                        "0",
                        "--parallel_init",
                        "1",
                        "--check",
                        "0",
                        "--op",
                        "prod",
                        "--datatype",
                        "bfloat16",
                        "--root",
                        "-1",
                        "--blocking",
                        "2",
                        "--stream_null",
                        "0",
                        "--timeout",
                        "30",
                        "--cudagraph",
                        "0",
                        "--report_cputime",
                        "0",
                        "--report_timestamps",
                        "1",
                        "--output_file",
                        "r.JSON",
                        "--average",
                        "0",
                        "--local_register",
                        "0",
                        "--cta_policy",
                        "0",
                        "--device_implementation",
                        "0",
                        "--device_cta_count",
                        "128",
                        "--memory",
                        "0",
                        "--unalign",
                        "1",
                        "--per_iter_timing",
                        "1",
                        "--per_iter_skip",
                        "10",
                        "--coll",
                        "broadcast",
                        "--time-budget",
                        "1.5",
                        "--hold-ms",
                        "2500",
                        "--read-result",
                        "1"});
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.ranks_per_thread, 3);
  EXPECT_EQ(o.min_bytes, 1024u);
  EXPECT_EQ(o.max_bytes, size_t{1} << 30);
  EXPECT_EQ(o.step_bytes, 512u);
  EXPECT_EQ(o.step_factor, 4u);
  EXPECT_EQ(o.iters, 11);
  EXPECT_EQ(o.agg_iters, 2);
  EXPECT_EQ(o.warmup_iters, 0);
  EXPECT_EQ(o.run_cycles, 0);  // nccl-tests: 0 = run until killed
  EXPECT_TRUE(o.parallel_init);
  EXPECT_EQ(o.check_iters, 0);
  EXPECT_EQ(Names(o.ops), std::vector<std::string>{"prod"});
  EXPECT_EQ(Names(o.dtypes), std::vector<std::string>{"bfloat16"});
  EXPECT_EQ(o.root, -1);
  EXPECT_EQ(o.blocking, Blocking::kWait);
  EXPECT_FALSE(o.stream_null);
  EXPECT_EQ(o.timeout_s, 30);
  EXPECT_TRUE(o.report_timestamps);
  EXPECT_EQ(o.output_file, "r.JSON");
  EXPECT_EQ(o.average, Average::kRank0);
  EXPECT_EQ(o.cta_policy, 0);
  EXPECT_EQ(o.device_cta_count, 128);
  EXPECT_EQ(o.unalign, 1);
  EXPECT_TRUE(o.per_iter_timing);
  EXPECT_EQ(o.per_iter_skip, 10);
  EXPECT_STREQ(o.coll->name, "broadcast");
  EXPECT_DOUBLE_EQ(o.time_budget_s, 1.5);
  EXPECT_EQ(o.hold_ms, 2500);
  EXPECT_EQ(o.read_result, 1);
}

TEST(PerfOptions, SizesAsNcclTestsReadsThem) {
  // (-b 0 where -e is below the default -b of 32M.)
  EXPECT_EQ(Ok({"p", "-b", "0", "-e", "0"}).max_bytes, 0u);
  EXPECT_EQ(Ok({"p", "-b", "0", "-e", "64k"}).max_bytes, 64u << 10);
  EXPECT_EQ(Ok({"p", "-b", "0", "-e", "3m"}).max_bytes, 3u << 20);
  EXPECT_EQ(Ok({"p", "-e", "2g"}).max_bytes, size_t{2} << 30);
  EXPECT_EQ(Ok({"p", "-b", "0", "-e", "1.5K"}).max_bytes, 1536u);
  EXPECT_EQ(Ok({"p", "-e", "128MB"}).max_bytes, 128u << 20);
  EXPECT_EQ(Ok({"p", "-b", "0", "-e", "16 M"}).max_bytes, 16u << 20);  // sscanf("%lf %1s") skips the space
  EXPECT_EQ(Ok({"p", "-b", "100", "-e", "100"}).min_bytes, 100u);
}

TEST(PerfOptions, IntegersTakeNcclTestsBases) {
  EXPECT_EQ(Ok({"p", "-n", "0x10"}).iters, 16);  // strtol base 0, as nccl-tests
  EXPECT_EQ(Ok({"p", "-n", "010"}).iters, 8);
}

TEST(PerfOptions, OpAll) {
  EXPECT_EQ(Names(Ok({"p", "-o", "all"}).ops),
            (std::vector<std::string>{"sum", "prod", "max", "min", "avg", "mulsum"}));
  for (const char* op : {"sum", "prod", "max", "min", "avg", "mulsum"}) {
    EXPECT_EQ(Names(Ok({"p", "--op", op}).ops), std::vector<std::string>{op});
  }
  const RedOpInfo* mulsum = FindRedOp("mulsum");
  ASSERT_NE(mulsum, nullptr);
  EXPECT_TRUE(mulsum->premul);
  EXPECT_EQ(mulsum->op, ncclSum);
}

TEST(PerfOptions, DatatypeAll) {
  const std::vector<std::string> all = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                        "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  EXPECT_EQ(Names(Ok({"p", "-d", "all"}).dtypes), all);
  for (const std::string& t : all) {
    const Options o = Ok({"p", "-d", t});
    ASSERT_EQ(o.dtypes.size(), 1u);
    EXPECT_EQ(o.dtypes[0]->name, t);
  }
  // Sizes of what NCCL moves.
  EXPECT_EQ(FindDtype("f8e4m3")->size, 1u);
  EXPECT_EQ(FindDtype("bfloat16")->size, 2u);
  EXPECT_EQ(FindDtype("uint64")->size, 8u);
  EXPECT_EQ(FindDtype("fp16")->type, ncclFloat16);  // alias kept from before
}

TEST(PerfOptions, RootAll) {
  EXPECT_EQ(Ok({"broadcast_perf", "-r", "all"}).root, -1);
  EXPECT_EQ(Ok({"broadcast_perf", "-r", "-1"}).root, -1);
  EXPECT_EQ(Ok({"reduce_perf", "-t", "4", "-r", "3"}).root, 3);
  // A root that is not a rank of a rooted collective.
  EXPECT_NE(Refused({"reduce_perf", "-t", "4", "-r", "4"}).find("not a rank"), std::string::npos);
  EXPECT_NE(Refused({"gather_perf", "-r", "1"}).find("not a rank"), std::string::npos);
  // Other collectives ignore -r, as nccl-tests does.
  EXPECT_EQ(Ok({"all_reduce_perf", "-r", "7"}).root, 7);
  // Multi-process: ranks are processes x threads x ranks per thread.
  EXPECT_EQ(Ok({"scatter_perf", "--rank", "1", "--nranks", "2", "--id-file", "f", "-t", "2", "-r", "3"}).root, 3);
}

TEST(PerfOptions, BlockingModes) {
  EXPECT_EQ(Ok({"p", "-z", "0"}).blocking, Blocking::kNone);
  EXPECT_EQ(Ok({"p", "-z", "1"}).blocking, Blocking::kBarrier);
  EXPECT_EQ(Ok({"p", "-z", "2"}).blocking, Blocking::kWait);
  EXPECT_EQ(Ok({"p", "-z", "3"}).blocking, Blocking::kOuterBarrier);
  Refused({"p", "-z", "4"});
  EXPECT_EQ(Ok({"p", "-z", "3", "-m", "4"}).agg_iters, 4);
  EXPECT_NE(Refused({"p", "-z", "1", "-m", "2"}).find("-m"), std::string::npos);
}

TEST(PerfOptions, AverageModes) {
  EXPECT_EQ(Ok({"p", "-a", "0"}).average, Average::kRank0);
  EXPECT_EQ(Ok({"p", "-a", "1"}).average, Average::kMean);
  EXPECT_EQ(Ok({"p", "-a", "2"}).average, Average::kMin);
  EXPECT_EQ(Ok({"p", "-a", "3"}).average, Average::kMax);
  Refused({"p", "-a", "4"});
}

TEST(PerfOptions, ProgramNamePicksTheCollective) {
  const std::pair<const char*, const char*> programs[] = {
      {"all_reduce_perf", "all_reduce"},
      {"all_gather_perf", "all_gather"},
      {"broadcast_perf", "broadcast"},
      {"reduce_perf", "reduce"},
      {"reduce_scatter_perf", "reduce_scatter"},
      {"alltoall_perf", "alltoall"},
      {"sendrecv_perf", "sendrecv"},
      {"gather_perf", "gather"},
      {"scatter_perf", "scatter"},
      {"hypercube_perf", "hypercube"},
  };
  for (const auto& [program, coll] : programs) {
    const Options o = Ok({std::string("/opt/build/bin/") + program});
    EXPECT_STREQ(o.coll->name, coll) << program;
    EXPECT_EQ(o.program, program);
  }
  EXPECT_STREQ(Ok({"./build/bin/conduit-perf"}).coll->name, "all_reduce");
  EXPECT_STREQ(Ok({"all_reduce_perf.sh"}).coll->name, "all_reduce");  // only exact names count
  EXPECT_EQ(CollForProgram("all_reduce_perf_x"), nullptr);
  // --coll overrides the name; it takes nccl-tests' names, the binaries', and ours from before.
  EXPECT_STREQ(Ok({"all_reduce_perf", "--coll", "sendrecv"}).coll->name, "sendrecv");
  EXPECT_STREQ(Ok({"conduit-perf", "--coll", "reduce_scatter_perf"}).coll->name, "reduce_scatter");
  EXPECT_STREQ(Ok({"conduit-perf", "--coll", "allgather"}).coll->name, "all_gather");
  EXPECT_NE(Refused({"conduit-perf", "--coll", "allmagic"}).find("--coll"), std::string::npos);
}

TEST(PerfOptions, MultiProcess) {
  const Options o = Ok({"p", "--rank", "2", "--nranks", "3", "--id-file", "/tmp/id", "-t", "2", "-g", "2"});
  EXPECT_TRUE(o.multi_process());
  EXPECT_EQ(o.processes(), 3);
  EXPECT_EQ(o.total_ranks(), 12);
  EXPECT_EQ(o.first_rank(), 8);
  EXPECT_NE(Refused({"p", "--rank", "0", "--nranks", "2"}).find("go together"), std::string::npos);
  EXPECT_NE(Refused({"p", "--rank", "2", "--nranks", "2", "--id-file", "f"}).find("--nranks"), std::string::npos);
}

TEST(PerfOptions, FeaturesWithoutGpusRefuseWhatTheyCannotHonour) {
  EXPECT_NE(Refused({"p", "-G", "1"}).find("host memory"), std::string::npos);
  EXPECT_NE(Refused({"p", "--cudagraph", "10"}).find("-G"), std::string::npos);
  EXPECT_NE(Refused({"p", "-D", "1"}).find("host memory"), std::string::npos);
  EXPECT_NE(Refused({"p", "-J", "results.txt"}).find(".json"), std::string::npos);
  EXPECT_EQ(Ok({"p", "-J", "dir.v2/results.json"}).output_file, "dir.v2/results.json");
  Refused({"p", "-J", "results.json/x"});
}

TEST(PerfOptions, NcclTestsWarningsRunOn) {
  Options o = Ok({"p", "-V", "0"});
  EXPECT_EQ(o.device_cta_count, 16);
  EXPECT_EQ(o.warnings.size(), 1u);
  o = Ok({"p", "-I", "2"});
  EXPECT_FALSE(o.per_iter_timing);
  EXPECT_EQ(o.warnings.size(), 1u);
  o = Ok({"p", "-K", "3"});  // without -I 1
  EXPECT_EQ(o.per_iter_skip, 0);
  EXPECT_EQ(o.warnings.size(), 1u);
  o = Ok({"p", "-I", "1", "-n", "5", "-K", "5"});  // must be < -n
  EXPECT_EQ(o.per_iter_skip, 0);
  EXPECT_EQ(o.warnings.size(), 1u);
}

TEST(PerfOptions, BadValues) {
  Refused({"p", "-o", "allreduce"});  // the collective is no longer -o
  Refused({"p", "-o", "xor"});
  Refused({"p", "-d", "float128"});
  Refused({"p", "-r", "first"});
  Refused({"p", "-n", "0"});
  Refused({"p", "-n", "ten"});
  Refused({"p", "-n", "5x"});
  Refused({"p", "-t", "0"});
  Refused({"p", "-b", "-1"});
  Refused({"p", "-b", "12Q"});
  Refused({"p", "-b", "1M", "-e", "1K"});
  Refused({"p", "-i", "0", "-b", "1", "-e", "10"});  // would never get there
  Refused({"p", "-f", "-2"});
  Refused({"p", "-c", "-1"});
  Refused({"p", "-p", "2"});
  Refused({"p", "-y", "2"});
  Refused({"p", "-R", "3"});
  Refused({"p", "-T", "-5"});
  Refused({"p", "--time-budget", "soon"});
  Refused({"p", "--hold-ms", "-1"});
  Refused({"p", "--hold-ms", "600001"});
  Refused({"p", "--read-result", "2"});
  Refused({"hypercube_perf", "-m", "2"});
  EXPECT_NE(Refused({"p", "-b"}).find("needs a value"), std::string::npos);
  EXPECT_NE(Refused({"p", "--iters"}).find("needs a value"), std::string::npos);
  EXPECT_NE(Refused({"p", "-q", "1"}).find("unknown option"), std::string::npos);
  EXPECT_NE(Refused({"p", "--no-such-flag", "x"}).find("unknown option"), std::string::npos);
  EXPECT_NE(Refused({"p", "extra"}).find("unexpected argument"), std::string::npos);
  EXPECT_NE(Refused({"p", "-n", "abc"}).find("-n/--iters"), std::string::npos);
}

TEST(PerfOptions, Help) {
  EXPECT_EQ(Parse({"p", "-h"}).outcome, ParseOutcome::kHelp);
  EXPECT_EQ(Parse({"p", "--help"}).outcome, ParseOutcome::kHelp);
  EXPECT_EQ(Parse({"p", "-n", "3", "--help"}).outcome, ParseOutcome::kHelp);
  const std::string u = Usage("all_reduce_perf");
  EXPECT_EQ(u.rfind("usage: all_reduce_perf ", 0), 0u);
  for (const char* flag : {"--nthreads",
                           "--ngpus",
                           "--minbytes",
                           "--maxbytes",
                           "--stepbytes",
                           "--stepfactor",
                           "--iters",
                           "--agg_iters",
                           "--warmup_iters",
                           "--run_cycles",
                           "--parallel_init",
                           "--check",
                           "--op",
                           "--datatype",
                           "--root",
                           "--blocking",
                           "--stream_null",
                           "--timeout",
                           "--cudagraph",
                           "--report_cputime",
                           "--report_timestamps",
                           "--output_file",
                           "--average",
                           "--local_register",
                           "--cta_policy",
                           "--device_implementation",
                           "--device_cta_count",
                           "--memory",
                           "--unalign",
                           "--per_iter_timing",
                           "--per_iter_skip",
                           "--help",
                           "--coll",
                           "--time-budget",
                           "--rank",
                           "--nranks",
                           "--id-file",
                           "--hold-ms",
                           "--read-result"}) {
    EXPECT_NE(u.find(flag), std::string::npos) << flag;
  }
}

TEST(PerfOptions, RepeatedParsesStartFresh) {
  Ok({"p", "-n", "3", "-b", "1K"});
  const Options o = Ok({"p"});
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.min_bytes, 32u << 20);
}

// The table's size and count columns follow nccl-tests' geometry: ops that split
// the buffer by rank round the per-rank part down to 16 bytes.
TEST(PerfGeometry, SizesMatchNcclTests) {
  Shape s = ShapeFor(Coll::kAllGather, 1024, 4, 3, 0);
  EXPECT_EQ(s.count, 84u);  // 1024/4/3 = 85 floats, down to a multiple of 4
  EXPECT_EQ(s.bytes, 1008u);
  s = ShapeFor(Coll::kAllReduce, 1023, 4, 3, 0);
  EXPECT_EQ(s.count, 255u);
  EXPECT_EQ(s.bytes, 1020u);
  s = ShapeFor(Coll::kReduceScatter, 64, 8, 2, 1);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.out_offset, 4u);  // in place, rank 1's output is its block of the input
  s = ShapeFor(Coll::kGather, 8, 4, 2, 1);
  EXPECT_EQ(s.count, 0u);  // nccl-tests prints such rows with count 0
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Coll::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(AlgBwFactor(Coll::kHyperCube, 4), 0.75);
}

}  // namespace
}  // namespace conduit::perf
