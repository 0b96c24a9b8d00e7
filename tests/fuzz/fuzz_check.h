// What the harnesses share: FUZZ_CHECK states a property every input must keep (a round
// trip, an invariant of a decoded value); breaking it aborts, which libFuzzer reports as a
// crash with the input that did it.
#ifndef CONDUIT_TESTS_FUZZ_FUZZ_CHECK_H_
#define CONDUIT_TESTS_FUZZ_FUZZ_CHECK_H_

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

#endif  // CONDUIT_TESTS_FUZZ_FUZZ_CHECK_H_
