// allreduce_demo: a plain NCCL program (it only includes nccl.h) used by the demo.
// Each rank contributes [rank+1, 2(rank+1), ...]; every rank checks the sum and rank 0
// prints it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/usage.h"
#include "nccl.h"

namespace {

bool ReadId(const std::string& path, ncclUniqueId* id) {
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(id->internal, sizeof(id->internal))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

constexpr char kUsage[] =
    "usage: conduit-allreduce-demo --rank R --nranks N --id-file PATH\n"
    "one rank of the demo's all-reduce through libnccl.so.2: rank 0 writes the ncclUniqueId to\n"
    "PATH, the others wait for it there (tools/demo/run-demo starts them)\n";

int main(int argc, char** argv) {
  conduit::tools::ExitWithUsageIfAsked(argc, argv, kUsage);
  int rank = -1, nranks = -1;
  std::string id_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--rank")) rank = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nranks")) nranks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--id-file")) id_file = argv[i + 1];
  }
  if (rank < 0 || nranks < 1 || id_file.empty()) {
    fputs(kUsage, stderr);
    return 2;
  }
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
      return 1;
    }
    std::string tmp = id_file + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof(id.internal));
    std::rename(tmp.c_str(), id_file.c_str());
  } else if (!ReadId(id_file, &id)) {
    fprintf(stderr, "rank %d: no unique id in %s\n", rank, id_file.c_str());
    return 1;
  }
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  const size_t n = 8;
  std::vector<float> send(n), recv(n, -1.0f);
  for (size_t i = 0; i < n; ++i) send[i] = static_cast<float>((rank + 1) * (i + 1));
  if (ncclAllReduce(send.data(), recv.data(), n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclAllReduce: %s\n", rank, ncclGetLastError(comm));
    return 1;
  }
  const float ranks_sum = nranks * (nranks + 1) / 2.0f;
  bool ok = true;
  for (size_t i = 0; i < n; ++i) ok = ok && recv[i] == ranks_sum * (i + 1);
  if (rank == 0) {
    printf("allreduce(sum) over %d ranks:", nranks);
    for (float v : recv) printf(" %g", v);
    printf("\nexpected: element i = %g * (i+1) -> %s\n", ranks_sum, ok ? "correct" : "WRONG");
  }
  if (!ok) fprintf(stderr, "rank %d: wrong result\n", rank);
  ncclCommDestroy(comm);
  return ok ? 0 : 1;
}
