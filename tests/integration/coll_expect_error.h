// --expect-error: loop on a checked allreduce until the communicator reports an error
// (a peer rank or daemon was killed by the test). Succeeds only if an error arrives.
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_EXPECT_ERROR_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_EXPECT_ERROR_H_

#include "coll_options.h"
#include "nccl.h"

namespace conduit::it {

enum class ErrorWait { kGotError, kNoError, kWrongResult };

// Prints "coll_check rank R: looping" after the first good allreduce (the harness waits for
// it before killing anything) and "coll_check rank R: got <ncclResult> ..." on the error.
ErrorWait LoopUntilError(ncclComm_t comm, int rank, int nranks, const Options& opt);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_EXPECT_ERROR_H_
