// Helpers for the object-store tests: a Cluster whose daemons form one object store,
// clients connected to any host's daemon (Unix sockets are reachable from the test's own
// namespace), deterministic object contents, checksums, and a raw program that can stop
// in the middle of a Put (to test pipelining from a sender that is still receiving, and
// a creator dying mid-Put).
#ifndef CONDUIT_TESTS_OBJECTS_OBJECT_CLUSTER_H_
#define CONDUIT_TESTS_OBJECTS_OBJECT_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../integration/cluster.h"
#include "../integration/integration_env.h"
#include "common/fd_io.h"
#include "conduit/hoplite.h"

namespace conduit::it {

std::vector<uint8_t> Pattern(size_t size, uint64_t seed);
uint64_t Fnv(const uint8_t* p, size_t n);
inline uint64_t Fnv(const std::vector<uint8_t>& v) { return Fnv(v.data(), v.size()); }
// The first integer after "key": in json (-1 if absent).
long long JsonNumber(const std::string& json, const std::string& key);
// Polls `done` every 10 ms until it holds (true) or timeout_ms pass (false).
bool WaitFor(const std::function<bool()>& done, int timeout_ms = 6000);

class ObjectCluster {
 public:
  // `daemon_binary`: what every host starts ("": conduitd; e.g. a build of an earlier release).
  ObjectCluster(const std::string& prefix, const std::string& subnet, int hosts, std::vector<std::string> extra_args = {},
                const std::string& rate = "", const std::string& daemon_binary = "");
  // Starts namespaces and daemons and waits until every daemon sees all the others.
  bool Start(std::string* error);
  Cluster& cluster() { return cluster_; }
  int hosts() const { return cluster_.config().hosts; }

  std::unique_ptr<hoplite::Client> Connect(int host);
  std::string State(int host);
  // Waits until `host`'s daemon sees `live` daemons (bounded).
  bool WaitLive(int host, int live, int timeout_ms = 15000);
  bool RestartDaemon(int host, std::string* error);
  long long Counter(int host, const std::string& key) { return JsonNumber(State(host), key); }
  // The directory entry of `id` in whichever daemon's state holds it (its shard's), up to
  // its owner, or "".
  std::string DirectoryEntry(const std::string& id);
  // How many bytes of `id` host's daemon has (-1: no copy there).
  long long ReadyOf(int host, const std::string& id);
  // The first integer after "key": in the running Reduce into `target` on `host` (-1: none).
  long long ReduceJobNumber(int host, const std::string& target, const std::string& key);

 private:
  Cluster cluster_;
};

// A program speaking the object protocol by hand, so a test can stop a Put half-way.
class RawPutter {
 public:
  // Connects to `socket` and starts Put(id, size) (size >= 64 KiB) with `access`
  // (objproto::Access); false with *error.
  bool Begin(const std::string& socket, const std::string& id, size_t size, std::string* error, uint32_t access = 0);
  // Copies data[from, to) into the object and reports `to` bytes ready. Like libhoplite, it
  // unmaps the object before reporting the last bytes, unless KeepMapping() was called.
  bool Write(const std::vector<uint8_t>& data, size_t from, size_t to);
  // A creator that keeps its writable mapping past the end of its Put (the daemon must
  // refuse to complete it).
  void KeepMapping() { keep_mapping_ = true; }
  // Waits for the daemon's PutDone (after the last Write).
  bool Finish(std::string* error);
  // Disconnects without finishing, as a dying program would.
  void Abandon();
  // The writable memfd the daemon handed over, and the creator's mapping (null once unmapped).
  int memfd() const { return memfd_.get(); }
  uint8_t* mapping() const { return map_; }
  ~RawPutter();

 private:
  UniqueFd fd_;
  UniqueFd memfd_;
  uint8_t* map_ = nullptr;
  size_t size_ = 0;
  bool keep_mapping_ = false;
};

// A fixture whose tests share one ObjectCluster: Suite::MakeCluster() builds it and it is
// started once for the suite; each test is skipped without namespaces and fails when the
// start failed.
template <typename Suite>
class SharedObjectClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!Cluster::SkipReason().empty()) return;
    oc_ = Suite::MakeCluster();
    std::string error;
    if (!oc_->Start(&error)) start_error_ = error;
  }
  static void TearDownTestSuite() {
    delete oc_;
    oc_ = nullptr;
  }
  void SetUp() override {
    CONDUIT_SKIP_UNLESS_CLUSTER();
    ASSERT_TRUE(start_error_.empty()) << start_error_;
  }
  inline static ObjectCluster* oc_ = nullptr;
  inline static std::string start_error_;
};

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_OBJECTS_OBJECT_CLUSTER_H_
