// Common test preamble: skip (with the reason) where namespaces or conduitd are unavailable.
#ifndef CONDUIT_TESTS_INTEGRATION_INTEGRATION_ENV_H_
#define CONDUIT_TESTS_INTEGRATION_INTEGRATION_ENV_H_

#include <gtest/gtest.h>

#include "cluster.h"

namespace conduit::it {

// Sanitized builds run several times slower: bounds on whole collective runs (not the
// failure-detection bounds under test) scale with them.
#if defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerSlowdown = 4;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kSanitizerSlowdown = 2;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

}  // namespace conduit::it

#define CONDUIT_SKIP_UNLESS_CLUSTER()                                       \
  do {                                                                      \
    std::string conduit_skip_reason = ::conduit::it::Cluster::SkipReason(); \
    if (!conduit_skip_reason.empty()) GTEST_SKIP() << conduit_skip_reason;  \
  } while (0)

// Starts the cluster or fails the test with the reason.
#define CONDUIT_START_CLUSTER(cluster)                                         \
  do {                                                                         \
    std::string conduit_start_error;                                           \
    ASSERT_TRUE((cluster).Start(&conduit_start_error)) << conduit_start_error; \
  } while (0)

#endif  // CONDUIT_TESTS_INTEGRATION_INTEGRATION_ENV_H_
