// A byte count from the environment: the shim's and the daemon's size knobs
// ($CONDUIT_STREAM_MIN_BYTES, $CONDUIT_NT_OUTPUT_MIN_BYTES, $CONDUIT_ADOPT_MIN_BYTES, ...).
#ifndef CONDUIT_DAEMON_COMMON_ENV_BYTES_H_
#define CONDUIT_DAEMON_COMMON_ENV_BYTES_H_

#include <cstddef>

namespace conduit {

// $name as a whole decimal number of bytes; `fallback` where it is unset, empty or not
// such a number.
size_t EnvBytes(const char* name, size_t fallback);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_ENV_BYTES_H_
