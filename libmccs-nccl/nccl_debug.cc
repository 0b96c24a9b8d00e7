#include "nccl_debug.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon_connection.h"
#include "device_memory.h"
#include "nccl.h"

namespace conduit {
namespace {

// Without NCCL_DEBUG: the shim's own INFO lines, but not NCCL's per-communicator and
// per-call ones (NCCL prints nothing unless asked), which CONDUIT_LOG_LEVEL=debug shows.
constexpr uint32_t kQuietSubsys = ~(kSubsysInit | kSubsysColl | kSubsysP2p | kSubsysCall);
std::atomic<uint32_t> g_subsys{kQuietSubsys};
std::atomic<bool> g_nccl_form{false};  // NCCL_DEBUG is set
thread_local int t_device = -1;  // -1: ask the driver

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kSubsysInit},     {"COLL", kSubsysColl},         {"P2P", kSubsysP2p},     {"SHM", kSubsysShm},
    {"NET", kSubsysNet},       {"GRAPH", kSubsysGraph},       {"TUNING", kSubsysTuning}, {"ENV", kSubsysEnv},
    {"ALLOC", kSubsysAlloc},   {"CALL", kSubsysCall},         {"PROXY", kSubsysProxy}, {"NVLS", kSubsysNvls},
    {"BOOTSTRAP", kSubsysBootstrap}, {"REG", kSubsysReg},     {"PROFILE", kSubsysProfile}, {"RAS", kSubsysRas},
    {"ALL", kSubsysAll},
};

const std::string& HostName() {
  static const std::string name = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("localhost");
    std::string h(buf);
    // NCCL shows the host name up to its first dot.
    return h.substr(0, h.find('.'));
  }();
  return name;
}

int LineDevice() {
  if (t_device >= 0) return t_device;
  const cuda::CudaDriver* d = ProcessCuda();
  cuda::CUcontext ctx = nullptr;
  cuda::CUdevice dev = 0;
  if (d == nullptr || d->CtxGetCurrent(&ctx) != cuda::kSuccess || ctx == nullptr) return 0;
  return d->CtxGetDevice(&dev) == cuda::kSuccess ? static_cast<int>(dev) : 0;
}

// "host:pid:tid [dev] NCCL INFO ".
int NcclPrefix(char* buf, size_t cap, LogLevel level) {
  const char* label = level == LogLevel::kDebug ? "TRACE" : level == LogLevel::kInfo ? "INFO" : "WARN";
  return snprintf(buf, cap, "%s:%d:%ld [%d] NCCL %s ", HostName().c_str(), getpid(), static_cast<long>(syscall(SYS_gettid)),
                  LineDevice(), label);
}

// NCCL_DEBUG_FILE's name with %h and %p replaced.
std::string DebugFileName(const char* pattern) {
  std::string out;
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += HostName();
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

}  // namespace

uint32_t ParseNcclSubsys(const char* text) {
  if (text == nullptr || *text == '\0') return kSubsysInit | kSubsysBootstrap | kSubsysEnv;
  const bool invert = text[0] == '^';
  uint32_t mask = 0;
  std::string list(invert ? text + 1 : text);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    for (const SubsysName& s : kSubsysNames) {
      if (strcasecmp(name.c_str(), s.name) == 0) mask |= s.bit;
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return invert ? ~mask : mask;
}

bool NcclInfoEnabled(uint32_t subsys) {
  if (!g_nccl_form.load(std::memory_order_relaxed) && LogEnabled(LogLevel::kDebug)) return true;
  return LogEnabled(LogLevel::kInfo) && (g_subsys.load(std::memory_order_relaxed) & subsys) != 0;
}

void SetNcclLogDevice(int device) { t_device = device; }

void ConfigureNcclDebug(bool level_set) {
  const char* debug = getenv("NCCL_DEBUG");
  if (debug == nullptr || *debug == '\0') return;
  SetLogPrefix(NcclPrefix);
  g_nccl_form.store(true);
  g_subsys.store(ParseNcclSubsys(getenv("NCCL_DEBUG_SUBSYS")));
  if (!level_set) {
    if (strcasecmp(debug, "INFO") == 0) SetLogLevel(LogLevel::kInfo);
    if (strcasecmp(debug, "TRACE") == 0) SetLogLevel(LogLevel::kDebug);
    if (strcasecmp(debug, "WARN") == 0 || strcasecmp(debug, "VERSION") == 0) SetLogLevel(LogLevel::kWarn);
  }
  if (const char* file = getenv("NCCL_DEBUG_FILE"); file != nullptr && *file != '\0') {
    const std::string name = DebugFileName(file);
    // Kept open for the process's life, as NCCL keeps its debug file.
    const int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      SetLogFd(fd);
    } else {
      CLOG_WARN("NCCL_DEBUG_FILE: cannot open %s (%s); logging to stderr", name.c_str(), strerror(errno));
    }
  }
  if (strcasecmp(debug, "WARN") != 0) {
    // NCCL prints its version line for VERSION and every level above it.
    LogfAlways(LogLevel::kInfo, "NCCL version %d.%d.%d%s (Conduit's libnccl.so.2: collectives run by conduitd at %s)",
               NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, DaemonConnection::SocketPath().c_str());
  }
}

}  // namespace conduit
