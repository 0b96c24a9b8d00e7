#include "coll_options.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "coll_dtype.h"

namespace conduit::it {
namespace {

const char kUsage[] =
    "usage: coll_check --rank R --nranks N --id-file PATH [--threads T]\n"
    "  [--colls allreduce,broadcast,reduce,allgather,reducescatter,sendrecv,alltoall,gather,scatter,split,backlog,\n"
    "           replace]\n"
    "  [--types all|float,int8,...] [--ops all|sum,prod,max,min,avg,premulsum]\n"
    "  [--sizes 0,1,7,1024,1M,64MiB] [--inplace no|yes|both] [--all-roots] [--iters K] [--seconds S [--stop-file F]]\n"
    "  [--seed S] [--nonblocking] [--expect-error [--error-count N]] [--hold-ms MS] [--max-seconds S] [--linger-ms MS [--release-file F]]\n"
    "  [--mem-alloc] [--messages K [--receives J] [--send-hold-ms MS]] [--verbose]\n"
    "sizes: element counts (K/M/G = 2^10/2^20/2^30 elements) or bytes with KiB/MiB/GiB\n"
    "backlog (not in the default list): rank 0 sends the last rank K messages (--messages, 8), one\n"
    "  ncclSend each, after --send-hold-ms; the last rank receives them (or the first J) only\n"
    "  after --hold-ms\n"
    "replace (not in the default list): a ring of sends and receives in one group, each rank's\n"
    "  receive into the very buffer it sends from (the result: its neighbour's data)\n";

const char* const kAllColls[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                                 "sendrecv",  "alltoall",  "gather", "scatter",   "split", "backlog", "replace"};

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ParseSize(const std::string& text, SizeSpec* out) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) return false;
  std::string suffix(end);
  struct {
    const char* name;
    uint64_t mult;
    bool bytes;
  } const kSuffixes[] = {{"", 1, false},
                         {"K", 1ull << 10, false},
                         {"M", 1ull << 20, false},
                         {"G", 1ull << 30, false},
                         {"KiB", 1ull << 10, true},
                         {"MiB", 1ull << 20, true},
                         {"GiB", 1ull << 30, true},
                         {"B", 1, true}};
  for (const auto& s : kSuffixes) {
    if (suffix == s.name) {
      out->value = v * s.mult;
      out->bytes = s.bytes;
      out->text = text;
      return true;
    }
  }
  return false;
}

bool ParseOp(const std::string& name, Op* op) {
  static const Op kOps[] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg, Op::kPreMulSum};
  for (Op o : kOps) {
    if (name == OpName(o)) {
      *op = o;
      return true;
    }
  }
  return false;
}

bool Fail(const std::string& why) {
  std::fprintf(stderr, "coll_check: %s\n%s", why.c_str(), kUsage);
  return false;
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kSum:
      return "sum";
    case Op::kProd:
      return "prod";
    case Op::kMax:
      return "max";
    case Op::kMin:
      return "min";
    case Op::kAvg:
      return "avg";
    case Op::kPreMulSum:
      return "premulsum";
  }
  return "?";
}

bool ParseOptions(int argc, char** argv, Options* opt) {
  std::string colls = "allreduce,broadcast,reduce,allgather,reducescatter,sendrecv,alltoall,gather,scatter,split";
  std::string types = "all", ops = "all", sizes = "0,1,7,1000", inplace = "both";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* dst) {
      if (i + 1 >= argc) return false;
      *dst = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--expect-error") {
      opt->expect_error = true;
    } else if (a == "--nonblocking") {
      opt->nonblocking = true;
    } else if (a == "--all-roots") {
      opt->all_roots = true;
    } else if (a == "--mem-alloc") {
      opt->mem_alloc = true;
    } else if (a == "--verbose") {
      opt->verbose = true;
    } else if (!value(&v)) {
      return Fail("missing value or unknown flag: " + a);
    } else if (a == "--rank") {
      opt->rank = std::atoi(v.c_str());
    } else if (a == "--nranks") {
      opt->nranks = std::atoi(v.c_str());
    } else if (a == "--id-file") {
      opt->id_file = v;
    } else if (a == "--threads") {
      opt->threads = std::atoi(v.c_str());
    } else if (a == "--colls") {
      colls = v;
    } else if (a == "--types") {
      types = v;
    } else if (a == "--ops") {
      ops = v;
    } else if (a == "--sizes") {
      sizes = v;
    } else if (a == "--inplace") {
      inplace = v;
    } else if (a == "--iters") {
      opt->iters = std::atoi(v.c_str());
    } else if (a == "--seconds") {
      opt->seconds = std::atoi(v.c_str());
    } else if (a == "--stop-file") {
      opt->stop_file = v;
    } else if (a == "--seed") {
      opt->seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (a == "--hold-ms") {
      opt->hold_ms = std::atoi(v.c_str());
    } else if (a == "--linger-ms") {
      opt->linger_ms = std::atoi(v.c_str());
    } else if (a == "--release-file") {
      opt->release_file = v;
    } else if (a == "--max-seconds") {
      opt->max_seconds = std::atoi(v.c_str());
    } else if (a == "--messages") {
      opt->messages = std::atoi(v.c_str());
    } else if (a == "--send-hold-ms") {
      opt->send_hold_ms = std::atoi(v.c_str());
    } else if (a == "--receives") {
      opt->receives = std::atoi(v.c_str());
    } else if (a == "--error-count") {
      opt->error_count = std::strtoull(v.c_str(), nullptr, 10);
    } else {
      return Fail("unknown flag: " + a);
    }
  }
  if (opt->nranks < 1 || opt->rank < 0 || opt->threads < 1 || opt->rank + opt->threads > opt->nranks)
    return Fail("need 0 <= rank, rank + threads <= nranks");
  if (opt->id_file.empty() && opt->threads != opt->nranks) return Fail("--id-file is required");
  for (const std::string& c : SplitCommas(colls)) {
    bool known = false;
    for (const char* k : kAllColls) known = known || c == k;
    if (!known) return Fail("unknown collective: " + c);
    opt->colls.push_back(c);
  }
  if (types == "all") {
    opt->types = AllTypes();
  } else {
    for (const std::string& t : SplitCommas(types)) {
      ncclDataType_t dt;
      if (!ParseType(t, &dt)) return Fail("unknown type: " + t);
      opt->types.push_back(dt);
    }
  }
  for (const std::string& o : SplitCommas(ops == "all" ? "sum,prod,max,min,avg,premulsum" : ops)) {
    Op op;
    if (!ParseOp(o, &op)) return Fail("unknown op: " + o);
    opt->ops.push_back(op);
  }
  for (const std::string& s : SplitCommas(sizes)) {
    SizeSpec spec;
    if (!ParseSize(s, &spec)) return Fail("bad size: " + s);
    opt->sizes.push_back(spec);
  }
  if (inplace == "no") {
    opt->inplace = false;
  } else if (inplace == "yes") {
    opt->outofplace = false;
  } else if (inplace != "both") {
    return Fail("--inplace takes no|yes|both");
  }
  return true;
}

}  // namespace conduit::it
