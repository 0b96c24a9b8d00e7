// What the harnesses share: FUZZ_CHECK states a property every input must keep (a round
// trip, an invariant of a decoded value); breaking it aborts, which libFuzzer reports as a
// crash with the input that did it.
#ifndef CONDUIT_TESTS_FUZZ_FUZZ_CHECK_H_
#define CONDUIT_TESTS_FUZZ_FUZZ_CHECK_H_

#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                      \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fprintf(stderr, "\n");                                                       \
      abort();                                                                     \
    }                                                                              \
  } while (0)

// A socket from which `data` can be read, then end of stream: for decoders that read
// sockets (buffered readers, sealed connections). -1 if it cannot be made.
inline int FuzzSocket(const uint8_t* data, size_t size) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -1;
  const bool written = size == 0 || write(fds[1], data, size) == static_cast<ssize_t>(size);
  close(fds[1]);
  if (!written) {
    close(fds[0]);
    return -1;
  }
  return fds[0];
}

#endif  // CONDUIT_TESTS_FUZZ_FUZZ_CHECK_H_
