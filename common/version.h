// The daemon's release, reported in HelloReply and by the admin API.
#ifndef CONDUIT_DAEMON_COMMON_VERSION_H_
#define CONDUIT_DAEMON_COMMON_VERSION_H_

namespace conduit {

inline constexpr char kDaemonVersion[] = "conduitd 0.1.0";

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_VERSION_H_
