// Hands the ncclUniqueId from the lowest rank to the other processes through a file, the
// way a launcher would: written atomically (tmp + rename) so readers never see half an id.
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_ID_FILE_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_ID_FILE_H_

#include <string>

#include "nccl.h"

namespace conduit::it {

bool WriteIdFile(const std::string& path, const ncclUniqueId& id);
// Polls until the file holds a whole id or timeout_s passes.
bool ReadIdFile(const std::string& path, int timeout_s, ncclUniqueId* id);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_ID_FILE_H_
