// trust_probe: an NCCL program (it links libnccl.so.2, the shim) for the trust tests.
//
//   trust_probe allreduce --rank R --nranks N --id-file F --count C [--iters K]
//     Joins the communicator and runs K checked float sum all-reduces of C elements. Ranks
//     may pass different counts on purpose. Prints "trust_probe rank R: allreduce -> RESULT
//     (last error)". Exit 0: every call succeeded with the right data; 10 + code: a call
//     failed with that ncclResult_t; 1: a call succeeded WITH WRONG DATA.
//
//   trust_probe forge --rank R --nranks N --id-file F
//     A program that learned a communicator's key (not its ncclUniqueId) tries to join it:
//     it takes the real id's key and root, makes up the secret, and calls ncclCommInitRank.
//     Exit 0 when the join is refused, 1 when it is let in.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coll_id_file.h"
#include "coll_nccl_util.h"
#include "common/unique_id.h"
#include "nccl.h"

namespace conduit::it {
namespace {

constexpr int kIdWaitSeconds = 60;

struct Args {
  std::string mode;
  int rank = -1, nranks = -1, iters = 1;
  size_t count = 1024;
  std::string id_file;
};

bool Parse(int argc, char** argv, Args* a) {
  if (argc < 2) return false;
  a->mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank") a->rank = std::stoi(v);
    else if (k == "--nranks") a->nranks = std::stoi(v);
    else if (k == "--id-file") a->id_file = v;
    else if (k == "--count") a->count = std::stoull(v);
    else if (k == "--iters") a->iters = std::stoi(v);
    else return false;
  }
  return a->rank >= 0 && a->nranks > a->rank && !a->id_file.empty();
}

bool GetId(const Args& a, ncclUniqueId* id) {
  if (a.rank == 0 && a.mode == "allreduce") {
    if (ncclGetUniqueId(id) != ncclSuccess) return false;
    return WriteIdFile(a.id_file, *id);
  }
  return ReadIdFile(a.id_file, kIdWaitSeconds, id);
}

int AllReduce(const Args& a) {
  ncclUniqueId id;
  if (!GetId(a, &id)) {
    printf("trust_probe rank %d: no unique id\n", a.rank);
    return 2;
  }
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, a.nranks, id, a.rank);
  if (r != ncclSuccess) {
    printf("trust_probe rank %d: init -> %s (%s)\n", a.rank, ResultName(r), ncclGetLastError(comm));
    return 10 + r;
  }
  std::vector<float> send(a.count), recv(a.count);
  for (int it = 0; it < a.iters; ++it) {
    for (size_t i = 0; i < a.count; ++i) send[i] = static_cast<float>((a.rank + 1) * (it + 1) + (i % 7));
    r = ncclAllReduce(send.data(), recv.data(), a.count, ncclFloat32, ncclSum, comm, NoStream());
    printf("trust_probe rank %d: allreduce -> %s (%s)\n", a.rank, ResultName(r),
           r == ncclSuccess ? "" : ncclGetLastError(comm));
    fflush(stdout);
    if (r != ncclSuccess) {
      ncclCommAbort(comm);
      return 10 + r;
    }
    for (size_t i = 0; i < a.count; ++i) {
      float want = static_cast<float>(a.nranks * (a.nranks + 1) / 2 * (it + 1) + a.nranks * static_cast<int>(i % 7));
      if (recv[i] != want) {
        printf("trust_probe rank %d: WRONG DATA with ncclSuccess at element %zu: %g, want %g\n", a.rank, i,
               static_cast<double>(recv[i]), static_cast<double>(want));
        return 1;
      }
    }
  }
  ncclCommDestroy(comm);
  return 0;
}

int Forge(const Args& a) {
  ncclUniqueId real;
  if (!ReadIdFile(a.id_file, kIdWaitSeconds, &real)) return 2;
  CommIdentity id;
  if (!DecodeUniqueId(real.internal, &id).ok()) return 2;
  std::mt19937_64 rng(static_cast<uint64_t>(getpid()));
  for (auto& b : id.secret) b = static_cast<uint8_t>(rng());
  ncclUniqueId forged;
  EncodeUniqueId(id, forged.internal);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, a.nranks, forged, a.rank);
  printf("trust_probe rank %d: forged join of communicator %s -> %s (%s)\n", a.rank, CommKeyShort(id.key).c_str(),
         ResultName(r), ncclGetLastError(comm));
  if (r == ncclSuccess) {
    ncclCommAbort(comm);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace conduit::it

int main(int argc, char** argv) {
  conduit::it::Args a;
  if (!conduit::it::Parse(argc, argv, &a)) {
    fprintf(stderr, "usage: trust_probe allreduce|forge --rank R --nranks N --id-file F [--count C] [--iters K]\n");
    return 2;
  }
  if (a.mode == "allreduce") return conduit::it::AllReduce(a);
  if (a.mode == "forge") return conduit::it::Forge(a);
  return 2;
}
