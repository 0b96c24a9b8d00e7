#include "bootstrap.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace conduit::perf {
namespace {

constexpr int kIdWaitSeconds = 60;

[[noreturn]] void Die(const char* what, ncclResult_t r) {
  std::fprintf(stderr, "conduit-perf: %s failed: %s\n", what, ncclGetErrorString(r));
  std::exit(3);
}

[[noreturn]] void DieErrno(const char* what, const std::string& path) {
  std::fprintf(stderr, "conduit-perf: %s %s: %s\n", what, path.c_str(), std::strerror(errno));
  std::exit(3);
}

// Written to a private temporary name and renamed into place, so a waiting rank
// sees either no file or all 128 bytes, never a torn one.
void PublishId(const std::string& path, const ncclUniqueId& id) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) DieErrno("cannot create", tmp);
  if (write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) DieErrno("cannot write", tmp);
  if (close(fd) != 0) DieErrno("cannot close", tmp);
  if (rename(tmp.c_str(), path.c_str()) != 0) DieErrno("cannot rename onto", path);
}

ncclUniqueId WaitForId(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kIdWaitSeconds);
  for (;;) {
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd >= 0) {
      ncclUniqueId id;
      const ssize_t n = read(fd, &id, sizeof id);
      close(fd);
      if (n == static_cast<ssize_t>(sizeof id)) return id;
      std::fprintf(stderr, "conduit-perf: %s holds %zd bytes, expected %zu\n", path.c_str(), n, sizeof id);
      std::exit(3);
    }
    if (errno != ENOENT) DieErrno("cannot open", path);
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "conduit-perf: no unique id appeared at %s within %d s (is rank 0 running?)\n",
                   path.c_str(), kIdWaitSeconds);
      std::exit(3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

LocalRanks InitComms(const Options& o) {
  LocalRanks l;
  if (o.multi_process()) {
    ncclUniqueId id;
    if (o.rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) Die("ncclGetUniqueId", r);
      PublishId(o.id_file, id);
    } else {
      id = WaitForId(o.id_file);
    }
    ncclComm_t comm;
    const ncclResult_t r = ncclCommInitRank(&comm, o.nranks, id, o.rank);
    if (r != ncclSuccess) Die("ncclCommInitRank", r);
    // Every rank has read the id once init returns (init needs all of them), so
    // rank 0 can remove it; a rerun with the same path cannot pick up a stale id.
    if (o.rank == 0) unlink(o.id_file.c_str());
    l.nranks = o.nranks;
    l.ranks.push_back(o.rank);
    l.comms.push_back(comm);
  } else {
    l.nranks = o.threads;
    l.comms.resize(static_cast<size_t>(o.threads));
    const ncclResult_t r = ncclCommInitAll(l.comms.data(), o.threads, nullptr);
    if (r != ncclSuccess) Die("ncclCommInitAll", r);
    for (int i = 0; i < o.threads; ++i) l.ranks.push_back(i);
  }
  return l;
}

void DestroyComms(LocalRanks& l) {
  for (ncclComm_t c : l.comms) ncclCommDestroy(c);
  l.comms.clear();
}

}  // namespace conduit::perf
