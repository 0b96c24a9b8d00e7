// Talking to a test cluster's admin sockets from inside a test: one HTTP request through
// conduitctl's own client, answers parsed with the daemon's JSON parser.
#ifndef CONDUIT_TESTS_INTEGRATION_ADMIN_CALL_H_
#define CONDUIT_TESTS_INTEGRATION_ADMIN_CALL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster.h"
#include "common/json.h"
#include "conduitctl_run.h"

namespace conduit::it {

struct AdminAnswer {
  int status = 0;  // HTTP status; 0 when the daemon could not be reached
  Json body;
  std::string text;  // the raw body, for failure messages
};

// `body`'s member `key`, or a null value when the body is no object or lacks it, so a test
// whose daemon answered something else fails an expectation instead of crashing.
const Json& Field(const Json& body, std::string_view key);

// `body`'s member `key` as a counter (the admin API's byte and call counts), or UINT64_MAX
// when it is missing or no number, which no expected count equals.
uint64_t Counter(const Json& body, std::string_view key);

AdminAnswer AdminCall(const Cluster& cluster, int host, const std::string& method, const std::string& target,
                      const std::string& body = "");

// Polls host's communicators until one satisfies `match` and is ready; returns its JSON
// (null on timeout).
Json WaitForComm(const Cluster& cluster, int host, const std::function<bool(const Json& comm)>& match,
                 std::chrono::milliseconds timeout);

// The path of host's collective link to `peer` in communicator `comm` (from GET
// /v1/communicators/{key}); -2 when there is none.
int CollectivePath(const Json& comm, int peer);

// Integers of a JSON array, for comparisons in assertions.
std::vector<int64_t> Ints(const Json* array);


}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_ADMIN_CALL_H_
