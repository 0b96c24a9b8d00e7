// Chooses, once per process, between the managed path and the native NCCL fallback.
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "common/log.h"
#include "daemon_connection.h"
#include "managed.h"
#include "nccl_debug.h"

namespace conduit {
namespace {

// NCCL's own variables when conduitd runs the program's collectives (docs/gpu.md, "NCCL
// variables"). NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE set the shim's logging
// (nccl_debug.h); NCCL_COMM_ID is read by ncclGetUniqueId (init.cc). The rest tune what
// conduitd decides for itself (algorithms, protocols, interfaces, buffers): each is named
// once, in one warning, as ignored, so a user who set one knows it has no effect here, and
// in an ENV line as NCCL shows the variables it reads.
void ApplyNcclVariables(bool level_set) {
  ConfigureNcclDebug(level_set);
  constexpr int kMaxNamed = 16;  // the line stays readable whatever the environment holds
  std::string ignored;
  int count = 0;
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "NCCL_", 5) != 0) continue;
    const size_t name_len = strcspn(*e, "=");
    const std::string name(*e, name_len);
    const char* value = (*e)[name_len] == '=' ? *e + name_len + 1 : "";
    const bool read = name == "NCCL_DEBUG" || name == "NCCL_DEBUG_SUBSYS" || name == "NCCL_DEBUG_FILE" ||
                      name == "NCCL_COMM_ID";
    NCCL_SHIM_INFO(kSubsysEnv, "%s set by environment to %.200s%s", name.c_str(), value,
                   read ? "." : " (ignored: conduitd decides this for every program).");
    if (read) continue;
    if (++count <= kMaxNamed) ignored += (ignored.empty() ? "" : ", ") + name;
  }
  if (count > kMaxNamed) ignored += " and " + std::to_string(count - kMaxNamed) + " more";
  if (count > 0) {
    CLOG_WARN("conduitd runs this program's collectives and chooses their algorithms, protocols and interfaces: "
              "ignoring %s (docs/gpu.md, \"NCCL variables\"; with CONDUIT_DISABLE=1 the native NCCL reads them)",
              ignored.c_str());
  }
}

}  // namespace

const NativeNccl* NativeFallback() {
  static const NativeNccl* native = [] {
    SetLogTag("conduit");
    const char* level = getenv("CONDUIT_LOG_LEVEL");
    LogLevel parsed;
    const bool level_set = level != nullptr && ParseLogLevel(level, &parsed);
    if (level_set) SetLogLevel(parsed);
    std::string why;
    const char* disable = getenv("CONDUIT_DISABLE");
    if (disable != nullptr && *disable != '\0' && *disable != '0') {
      why = "CONDUIT_DISABLE is set";
    } else {
      std::unique_ptr<DaemonConnection> probe;
      Status st = DaemonConnection::Open(&probe);
      if (st.ok()) {
        ApplyNcclVariables(level_set);
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
