// Chooses, once per process, between the managed path and the native NCCL fallback.
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "common/log.h"
#include "daemon_connection.h"
#include "managed.h"

namespace conduit {

const NativeNccl* NativeFallback() {
  static const NativeNccl* native = [] {
    SetLogTag("conduit");
    const char* level = getenv("CONDUIT_LOG_LEVEL");
    LogLevel parsed;
    if (level != nullptr && ParseLogLevel(level, &parsed)) SetLogLevel(parsed);
    std::string why;
    const char* disable = getenv("CONDUIT_DISABLE");
    if (disable != nullptr && *disable != '\0' && *disable != '0') {
      why = "CONDUIT_DISABLE is set";
    } else {
      std::unique_ptr<DaemonConnection> probe;
      Status st = DaemonConnection::Open(&probe);
      if (st.ok()) {
        CLOG_DEBUG("using conduitd at %s", DaemonConnection::SocketPath().c_str());
        return static_cast<const NativeNccl*>(nullptr);
      }
      why = st.message();
    }
    std::string load_error;
    const NativeNccl* lib = LoadNativeNccl(&load_error);
    if (lib == nullptr) {
      CLOG_WARN("%s, and no native NCCL could be loaded (%s): NCCL calls will fail", why.c_str(), load_error.c_str());
      return static_cast<const NativeNccl*>(nullptr);
    }
    CLOG_INFO("%s; falling back to the native NCCL at %s", why.c_str(), lib->path.c_str());
    return lib;
  }();
  return native;
}

}  // namespace conduit
