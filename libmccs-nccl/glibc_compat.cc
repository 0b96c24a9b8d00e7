// What keeps libnccl.so.2 loadable on glibc 2.34 and 2.35 (Ubuntu 22.04, which most PyTorch
// and CUDA images are built on) although it is built on Debian 12's glibc 2.36.
//
// The shim links libstdc++ statically (so it works next to whatever libstdc++ the program
// brings), and GCC 12's libstdc++.a ties its copy-on-write std::string instantiations to
// std::random_device, whose implementation calls arc4random: a glibc 2.36 symbol that would
// make the dynamic linker refuse the whole library on older systems. The shim never uses
// random_device; this definition, hidden inside the library, satisfies that reference with
// the getrandom system call (glibc 2.25) instead.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t value = 0;
  for (;;) {
    ssize_t n = getrandom(&value, sizeof value, 0);
    if (n == static_cast<ssize_t>(sizeof value)) return value;
    if (n < 0 && errno != EINTR) abort();  // no entropy source at all: nothing sane to return
  }
}
