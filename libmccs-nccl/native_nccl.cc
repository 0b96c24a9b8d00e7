#include "native_nccl.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace conduit {
namespace {

constexpr char kLibraryName[] = "libnccl.so.2";

// RTLD_DEEPBIND makes the native library resolve its own nccl* calls inside
// itself instead of through our interposing exports. The sanitizer runtimes
// abort on RTLD_DEEPBIND, so sanitizer builds go without it; they never run
// real GPU work, where the difference would matter.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CONDUIT_SANITIZER_BUILD_ 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define CONDUIT_SANITIZER_BUILD_ 1
#endif
#endif
#ifdef CONDUIT_SANITIZER_BUILD_
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

// Empty when the path does not name an existing file.
std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return std::string();
  return buf;
}

// The shared object this code was linked into: normally our libnccl.so.2,
// or a test binary when linked statically.
std::string SelfPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&LoadNativeNccl), &info) == 0 ||
      info.dli_fname == nullptr) {
    return std::string();
  }
  return RealPath(info.dli_fname);
}

void AppendDirsFromGlob(const char* pattern, std::vector<std::string>* dirs) {
  glob_t g;
  if (glob(pattern, GLOB_ONLYDIR, nullptr, &g) == 0) {
    // glob sorts ascending; walking backwards tries cuda-12.9 before
    // cuda-12.4, a cheap approximation of "newest toolkit first".
    for (size_t i = g.gl_pathc; i > 0; --i) dirs->push_back(g.gl_pathv[i - 1]);
  }
  globfree(&g);
}

// One loaded object's dynamic section: if it needs libnccl.so.2, the directories of its
// RUNPATH (else RPATH) with $ORIGIN expanded, where the loader would have looked for it.
int AppendSearchDirsOfNeeder(dl_phdr_info* info, size_t, void* data) {
  auto* dirs = static_cast<std::vector<std::string>*>(data);
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dyn == nullptr) return 0;
  uintptr_t strtab = 0;
  std::vector<uintptr_t> needed;
  long runpath = -1, rpath = -1;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
    if (d->d_tag == DT_NEEDED) needed.push_back(d->d_un.d_val);
    if (d->d_tag == DT_RUNPATH) runpath = static_cast<long>(d->d_un.d_val);
    if (d->d_tag == DT_RPATH) rpath = static_cast<long>(d->d_un.d_val);
  }
  // The loader relocates DT_STRTAB in place for the objects it loads, not for the vDSO.
  if (strtab == 0) return 0;
  if (strtab < info->dlpi_addr) strtab += info->dlpi_addr;
  const char* str = reinterpret_cast<const char*>(strtab);
  bool needs_nccl = false;
  for (uintptr_t n : needed) needs_nccl = needs_nccl || strcmp(str + n, kLibraryName) == 0;
  const long list = runpath >= 0 ? runpath : rpath;
  if (!needs_nccl || list < 0) return 0;
  std::string origin = info->dlpi_name != nullptr && info->dlpi_name[0] != '\0' ? info->dlpi_name : "/proc/self/exe";
  origin = RealPath(origin);
  origin = origin.substr(0, origin.rfind('/'));
  std::string paths = str + list;
  size_t start = 0;
  while (start <= paths.size()) {
    size_t end = paths.find(':', start);
    if (end == std::string::npos) end = paths.size();
    std::string dir = paths.substr(start, end - start);
    for (const char* token : {"${ORIGIN}", "$ORIGIN"}) {
      for (size_t at; (at = dir.find(token)) != std::string::npos;) dir.replace(at, strlen(token), origin);
    }
    if (!dir.empty()) dirs->push_back(dir);
    start = end + 1;
  }
  return 0;
}

std::vector<std::string> CandidatePaths() {
  const char* forced = getenv("CONDUIT_NATIVE_NCCL");
  if (forced != nullptr && forced[0] != '\0') return {forced};

  // First where the program's own libraries would have found NCCL without us: PyTorch's
  // libtorch_cuda.so names pip's site-packages/nvidia/nccl/lib in its RUNPATH.
  std::vector<std::string> dirs;
  dl_iterate_phdr(AppendSearchDirsOfNeeder, &dirs);
  dirs.push_back("/usr/local/cuda/lib64");
  dirs.push_back("/usr/local/cuda/lib");
  AppendDirsFromGlob("/usr/local/cuda-*/lib*", &dirs);
  dirs.push_back("/usr/lib/x86_64-linux-gnu");
  dirs.push_back("/usr/lib64");
  if (const char* ld = getenv("LD_LIBRARY_PATH")) {
    std::string list = ld;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      // An empty entry means the current directory to the dynamic loader,
      // which is never where a system NCCL lives; skip it.
      if (end > start) dirs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  std::vector<std::string> paths;
  paths.reserve(dirs.size());
  for (const std::string& dir : dirs) paths.push_back(dir + "/" + kLibraryName);
  return paths;
}

// Fills *lib from an open handle. Only ncclGetVersion is mandatory: without
// it the file is not an NCCL at all.
bool ResolveSymbols(void* handle, NativeNccl* lib) {
#define CONDUIT_RESOLVE_(ret, name, params, args) \
  lib->name = reinterpret_cast<ret(*) params>(dlsym(handle, "nccl" #name));
  CONDUIT_NCCL_API_LIST(CONDUIT_RESOLVE_)
  CONDUIT_NCCL_DEVICE_HOST_API_LIST(CONDUIT_RESOLVE_)
#undef CONDUIT_RESOLVE_
  lib->ResetDebugInitInternal = reinterpret_cast<void (*)(void)>(
      dlsym(handle, "ncclResetDebugInitInternal"));
  return lib->GetVersion != nullptr;
}

// Opens one candidate. On failure returns nullptr and adds a reason to *why.
NativeNccl* TryLoad(const std::string& path, const std::string& self,
                    std::vector<std::string>* tried, std::string* why) {
  const std::string real = RealPath(path);
  if (real.empty()) return nullptr;  // Absent: not worth reporting each one.
  if (std::find(tried->begin(), tried->end(), real) != tried->end()) {
    return nullptr;  // Same file reached through another directory.
  }
  tried->push_back(real);
  if (!self.empty() && real == self) {
    *why += "  " + path + ": is Conduit's own library\n";
    return nullptr;
  }
  void* handle = dlopen(path.c_str(), kOpenFlags);
  if (handle == nullptr) {
    const char* err = dlerror();
    *why +=
        "  " + path + ": " + (err != nullptr ? err : "dlopen failed") + "\n";
    return nullptr;
  }
  // A copy of our library under another name would pass the path check but
  // come back as the object we are already running in.
  Dl_info info;
  void* probe = dlsym(handle, "ncclGetVersion");
  Dl_info self_info;
  if (probe != nullptr && dladdr(probe, &info) != 0 &&
      dladdr(reinterpret_cast<void*>(&LoadNativeNccl), &self_info) != 0 &&
      info.dli_fbase == self_info.dli_fbase) {
    dlclose(handle);
    *why += "  " + path + ": resolves to Conduit's own library\n";
    return nullptr;
  }
  auto* lib = new NativeNccl;
  if (!ResolveSymbols(handle, lib)) {
    delete lib;
    dlclose(handle);
    *why += "  " + path + ": does not export ncclGetVersion\n";
    return nullptr;
  }
  lib->path = path;
  if (lib->GetVersion(&lib->version) != ncclSuccess) lib->version = 0;
  return lib;
}

struct LoadOutcome {
  const NativeNccl* lib = nullptr;
  std::string why;
};

LoadOutcome Load() {
  LoadOutcome out;
  const std::string self = SelfPath();
  std::vector<std::string> tried;
  std::string reasons;
  const std::vector<std::string> candidates = CandidatePaths();
  for (const std::string& path : candidates) {
    // Intentionally leaked: the native library stays loaded for the life of
    // the process, and static destructors must not race with late calls.
    if (NativeNccl* lib = TryLoad(path, self, &tried, &reasons)) {
      out.lib = lib;
      return out;
    }
  }
  out.why = "no native " + std::string(kLibraryName) + " found";
  if (reasons.empty()) {
    // Nothing existed at all: say where we looked, which is the useful part.
    out.why += "; looked for";
    for (const std::string& path : candidates) out.why += " " + path;
  } else {
    reasons.pop_back();  // Trailing newline.
    out.why += ":\n" + reasons;
  }
  return out;
}

}  // namespace

const NativeNccl* LoadNativeNccl(std::string* why) {
  // A function-local static is initialized exactly once even under
  // concurrent first calls, and is never destroyed (it holds a pointer).
  static const LoadOutcome* const outcome = new LoadOutcome(Load());
  if (outcome->lib == nullptr && why != nullptr) *why = outcome->why;
  return outcome->lib;
}

}  // namespace conduit
