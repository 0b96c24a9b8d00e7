// The running program's executable name, as shims tell their daemon (admission, logs).
#ifndef CONDUIT_DAEMON_COMMON_EXE_NAME_H_
#define CONDUIT_DAEMON_COMMON_EXE_NAME_H_

#include <string>

namespace conduit {

// Basename of /proc/self/exe, "unknown" when it cannot be read.
std::string ExeName();

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_EXE_NAME_H_
