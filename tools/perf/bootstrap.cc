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
  const char* detail = ncclGetLastError(nullptr);
  std::fprintf(stderr, "conduit-perf: %s failed: %s%s%s\n", what, ncclGetErrorString(r),
               detail != nullptr && *detail != '\0' ? ": " : "", detail != nullptr ? detail : "");
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

ncclUniqueId ShareUniqueId(const Options& o) {
  ncclUniqueId id;
  if (o.multi_process() && o.rank != 0) return WaitForId(o.id_file);
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) Die("ncclGetUniqueId", r);
  if (o.multi_process()) PublishId(o.id_file, id);
  return id;
}

void InitComms(const Options& o, const ncclUniqueId& id, int first_local, std::span<ncclComm_t> out) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (o.cta_policy >= 0) config.CTAPolicy = o.cta_policy;
  ncclResult_t r = ncclGroupStart();
  for (size_t i = 0; i < out.size() && r == ncclSuccess; ++i) {
    const int rank = o.first_rank() + first_local + static_cast<int>(i);
    r = ncclCommInitRankConfig(&out[i], o.total_ranks(), id, rank, &config);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r != ncclSuccess) Die("ncclCommInitRankConfig", r);
  if (end != ncclSuccess) Die("ncclCommInitRankConfig (ncclGroupEnd)", end);
}

void ForgetUniqueId(const Options& o) {
  if (o.multi_process() && o.rank == 0) unlink(o.id_file.c_str());
}

void DestroyComms(std::span<ncclComm_t> comms) {
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

}  // namespace conduit::perf
