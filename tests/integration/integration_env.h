// Common test preamble: skip (with the reason) where namespaces or conduitd are unavailable.
#ifndef CONDUIT_TESTS_INTEGRATION_INTEGRATION_ENV_H_
#define CONDUIT_TESTS_INTEGRATION_INTEGRATION_ENV_H_

#include <gtest/gtest.h>

#include <string>

#include "cluster.h"

// The sanitizer this file is built with: GCC defines __SANITIZE_*__, clang 14 only answers
// __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define CONDUIT_IT_ASAN 1
#elif defined(__SANITIZE_THREAD__)
#define CONDUIT_IT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONDUIT_IT_ASAN 1
#elif __has_feature(thread_sanitizer)
#define CONDUIT_IT_TSAN 1
#endif
#endif

namespace conduit::it {

// Sanitized builds run several times slower: bounds on whole collective runs (not the
// failure-detection bounds under test) scale with them.
#if defined(CONDUIT_IT_TSAN)
inline constexpr int kSanitizerSlowdown = 4;
#elif defined(CONDUIT_IT_ASAN)
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


namespace conduit::it {

// A fixture whose tests share one Cluster, built from Suite::Config() and started once for
// the suite; each test is skipped without namespaces and fails when the start failed. A
// suite with more to set up calls ClusterSuiteTest::SetUp() first and returns when it
// skipped or failed (IsSkipped() || HasFatalFailure()).
template <typename Suite>
class ClusterSuiteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Cluster::SkipReason().empty()) return;
    cluster_ = new Cluster(Suite::Config());
    if (!cluster_->Start(&start_error_)) {
      delete cluster_;
      cluster_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    CONDUIT_SKIP_UNLESS_CLUSTER();
    ASSERT_NE(cluster_, nullptr) << start_error_;
  }
  inline static Cluster* cluster_ = nullptr;
  inline static std::string start_error_;
};

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_INTEGRATION_ENV_H_
