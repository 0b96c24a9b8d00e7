// conduit-copy-bench: what it costs to move a program's own host buffer (not from
// ncclMemAlloc) into and out of the daemon's reach, by the two routes Linux offers, side by
// side in one run, in GB/s of payload:
//
//  * staged (what ships): the shim copies the input into the shared staging segment and the
//    daemon reads it there; the daemon writes the result into the segment and the shim
//    copies it into the program's output (docs/design.md, "Copies per payload byte");
//  * cross-memory attach: the daemon pulls the input a chunk at a time with
//    process_vm_readv into a buffer that stays in its cache and reads it there; it writes
//    each chunk of the result into that buffer and pushes it into the program's output
//    with process_vm_writev (the issue's "daemon reading and writing program buffers in
//    place").
//
// The program is a forked child holding its input and output (malloc'd, optionally on
// transparent huge pages); the parent plays the daemon, and the shim's copies for the
// staged route (the same CPU work wherever it runs). The daemon's own use of the bytes is a
// read pass (a sum) for the input and a write pass for the result, in both routes.
//
//   conduit-copy-bench [--sizes 1M,4M,32M] [--chunk-kib 256] [--seconds 0.3] [--huge-pages]
//
// The figures behind "Copies per payload byte" in docs/design.md (why the staged route stays).
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/number_arg.h"
#include "cli/size_arg.h"
#include "cli/usage.h"

namespace conduit {
namespace {

using Clock = std::chrono::steady_clock;

volatile uint64_t g_sink = 0;  // keeps the read passes from being optimized away

uint64_t ReadPass(const uint8_t* p, size_t n) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t s = 0;
  for (size_t i = 0; i < n / 8; ++i) s += w[i];
  return s;
}

void WritePass(uint8_t* p, size_t n, uint8_t value) { memset(p, value, n); }

// Memory of `bytes` on a 2 MiB boundary, touched; on transparent huge pages if asked.
uint8_t* PrivateBuffer(size_t bytes, bool huge) {
  void* p = nullptr;
  if (posix_memalign(&p, size_t{2} << 20, bytes) != 0) return nullptr;
  if (huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 1, bytes);
  return static_cast<uint8_t*>(p);
}

// Runs fn() repeatedly for about `seconds`; GB/s of `bytes` per call.
template <typename Fn>
double Rate(size_t bytes, double seconds, Fn fn) {
  fn();  // warm
  long calls = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    if (!fn()) return -1;
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return static_cast<double>(bytes) * calls / elapsed / 1e9;
}

// A size of 1 byte to 4 GiB (cli/size_arg.h's form).
bool ParseSize(const std::string& s, size_t* out) {
  return tools::ParseSizeArg(s.c_str(), out) && *out > 0 && *out <= (size_t{4} << 30);
}

int Main(int argc, char** argv) {
  const char* usage =
      "usage: conduit-copy-bench [--sizes LIST (1M,4M,32M)] [--chunk-kib K (256)] [--seconds S (0.3)]\n"
      "                          [--huge-pages]\n"
      "a program's own buffer into and out of the daemon's reach: through the staging segment against\n"
      "process_vm_readv/writev a chunk at a time, GB/s of payload (docs/design.md)\n";
  tools::ExitWithUsageIfAsked(argc, argv, usage);
  std::vector<size_t> sizes;
  size_t chunk_kib = 256;
  double seconds = 0.3;
  bool huge = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--huge-pages") {
      huge = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s needs a value\n%s", argv[i], usage);
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--sizes") {
      size_t from = 0;
      while (from <= value.size()) {
        const size_t comma = value.find(',', from);
        const std::string item = value.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
        size_t bytes = 0;
        if (!ParseSize(item, &bytes)) {
          fprintf(stderr, "--sizes: '%s' is not a size from 1 byte to 4G\n%s", item.c_str(), usage);
          return 2;
        }
        sizes.push_back(bytes);
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
    } else if (flag == "--chunk-kib") {
      int64_t kib = 0;
      if (!tools::ParseIntArg(value.c_str(), 4, 65536, &kib)) {
        fprintf(stderr, "--chunk-kib: '%s' is not a whole number from 4 to 65536\n%s", value.c_str(), usage);
        return 2;
      }
      chunk_kib = static_cast<size_t>(kib);
    } else if (flag == "--seconds") {
      if (!tools::ParseRealArg(value.c_str(), 0, 60, true, &seconds)) {
        fprintf(stderr, "--seconds: '%s' is not a number in (0, 60]\n%s", value.c_str(), usage);
        return 2;
      }
    } else {
      fprintf(stderr, "unknown flag %s\n%s", flag.c_str(), usage);
      return 2;
    }
  }
  if (sizes.empty()) sizes = {size_t{1} << 20, size_t{4} << 20, size_t{32} << 20};
  size_t largest = 0;
  for (size_t s : sizes) largest = std::max(largest, s);
  const size_t chunk = chunk_kib << 10;

  // The program: its input and output, then it waits to be killed. Allocated before the
  // fork, so the parent knows their addresses (the child's copies of them are its own).
  uint8_t* program_in = PrivateBuffer(largest, huge);
  uint8_t* program_out = PrivateBuffer(largest, huge);
  if (program_in == nullptr || program_out == nullptr) {
    fprintf(stderr, "conduit-copy-bench: out of memory\n");
    return 1;
  }
  const pid_t program = fork();
  if (program < 0) {
    perror("conduit-copy-bench: fork");
    return 1;
  }
  if (program == 0) {
    memset(program_out, 2, largest);  // its own pages, not shared with the parent's
    memset(program_in, 3, largest);
    for (;;) pause();
  }
  // The parent's own copies of the buffers stand for the program's in the staged route.
  uint8_t* segment = static_cast<uint8_t*>(
      mmap(nullptr, largest, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::vector<uint8_t> hot(chunk, 0);
  int rc = 0;
  if (segment == MAP_FAILED) {
    perror("conduit-copy-bench: mmap");
    rc = 1;
  } else {
    memset(segment, 0, largest);
    printf("# GB/s of payload, %s pages, %zu KiB chunks for process_vm_readv/writev\n",
           huge ? "transparent huge" : "4 KiB", chunk_kib);
    printf("%10s %14s %14s %8s %14s %14s %8s\n", "bytes", "in: staged", "in: pvm_readv", "ratio", "out: staged",
           "out: pvm_write", "ratio");
    for (size_t n : sizes) {
      // Input, staged: the shim's copy into the segment, then the daemon reads it there.
      const double in_staged = Rate(n, seconds, [&] {
        memcpy(segment, program_in, n);
        g_sink = g_sink + ReadPass(segment, n);
        return true;
      });
      // Input, cross-memory attach: a chunk into the daemon's cache, then read there.
      const double in_cma = Rate(n, seconds, [&] {
        for (size_t at = 0; at < n; at += chunk) {
          const size_t len = std::min(chunk, n - at);
          iovec local{hot.data(), len}, remote{program_in + at, len};
          if (process_vm_readv(program, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(len)) return false;
          g_sink = g_sink + ReadPass(hot.data(), len);
        }
        return true;
      });
      // Output, staged: the daemon writes the result into the segment, the shim copies it out.
      const double out_staged = Rate(n, seconds, [&] {
        WritePass(segment, n, 4);
        memcpy(program_out, segment, n);
        return true;
      });
      // Output, cross-memory attach: each result chunk written in cache, then pushed out.
      const double out_cma = Rate(n, seconds, [&] {
        for (size_t at = 0; at < n; at += chunk) {
          const size_t len = std::min(chunk, n - at);
          WritePass(hot.data(), len, 5);
          iovec local{hot.data(), len}, remote{program_out + at, len};
          if (process_vm_writev(program, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(len)) return false;
        }
        return true;
      });
      if (in_cma < 0 || out_cma < 0) {
        perror("conduit-copy-bench: process_vm_readv/writev (ptrace access to the child?)");
        rc = 1;
        break;
      }
      printf("%10zu %14.2f %14.2f %8.2f %14.2f %14.2f %8.2f\n", n, in_staged, in_cma, in_cma / in_staged, out_staged,
             out_cma, out_cma / out_staged);
      fflush(stdout);
    }
  }
  kill(program, SIGKILL);
  waitpid(program, nullptr, 0);
  return rc;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
