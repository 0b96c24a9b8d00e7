#include "cuda/nvrtc.h"

#include <dlfcn.h>

#include <cstdlib>
#include <iterator>
#include <type_traits>

namespace conduit::cuda {
namespace {

// Newest first; a toolkit's lib64 as the last resort (it is often not on the loader path).
const char* const kCandidates[] = {
    "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so",
};

constexpr int kNvrtcSuccess = 0;

}  // namespace

const Nvrtc* Nvrtc::Load(std::string* why) {
  static std::string reason;
  static const Nvrtc* loaded = []() -> const Nvrtc* {
    std::vector<std::string> names;
    const char* env = std::getenv("CONDUIT_NVRTC");
    if (env != nullptr && *env != '\0') {
      names.push_back(env);
    } else {
      names.assign(std::begin(kCandidates), std::end(kCandidates));
    }
    void* handle = nullptr;
    std::string path;
    for (const std::string& name : names) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) {
        path = name;
        break;
      }
    }
    if (handle == nullptr) {
      reason = "NVRTC absent: none of";
      for (const std::string& name : names) reason += " " + name;
      reason += " could be loaded";
      return nullptr;
    }
    auto* n = new Nvrtc;
    n->path_ = path;
    bool ok = true;
    auto bind = [&](auto* member, const char* symbol) {
      *member = reinterpret_cast<std::remove_pointer_t<decltype(member)>>(dlsym(handle, symbol));
      if (*member == nullptr && ok) {
        ok = false;
        reason = path + " lacks " + symbol;
      }
    };
    bind(&n->version_, "nvrtcVersion");
    bind(&n->error_string_, "nvrtcGetErrorString");
    bind(&n->create_, "nvrtcCreateProgram");
    bind(&n->destroy_, "nvrtcDestroyProgram");
    bind(&n->compile_, "nvrtcCompileProgram");
    bind(&n->ptx_size_, "nvrtcGetPTXSize");
    bind(&n->ptx_, "nvrtcGetPTX");
    bind(&n->log_size_, "nvrtcGetProgramLogSize");
    bind(&n->log_, "nvrtcGetProgramLog");
    n->cubin_size_ = reinterpret_cast<decltype(n->cubin_size_)>(dlsym(handle, "nvrtcGetCUBINSize"));
    n->cubin_ = reinterpret_cast<decltype(n->cubin_)>(dlsym(handle, "nvrtcGetCUBIN"));
    if (!ok || n->version_(&n->major_, &n->minor_) != kNvrtcSuccess) {
      if (ok) reason = path + ": nvrtcVersion failed";
      delete n;
      return nullptr;
    }
    return n;  // never unloaded
  }();
  if (loaded == nullptr && why != nullptr) *why = reason;
  return loaded;
}

Status Nvrtc::CompileToPtx(const std::string& program_name, const std::string& source,
                           const std::vector<Header>& headers, const std::vector<std::string>& options,
                           std::string* ptx) const {
  return Compile(program_name, source, headers, options, false, ptx);
}

Status Nvrtc::CompileToCubin(const std::string& program_name, const std::string& source,
                             const std::vector<Header>& headers, const std::vector<std::string>& options,
                             std::string* cubin) const {
  if (!has_cubin()) return InvalidUsage("%s cannot emit machine code (no nvrtcGetCUBIN)", path_.c_str());
  return Compile(program_name, source, headers, options, true, cubin);
}

Status Nvrtc::Compile(const std::string& program_name, const std::string& source, const std::vector<Header>& headers,
                      const std::vector<std::string>& options, bool cubin, std::string* out) const {
  std::vector<std::string> header_texts;
  std::vector<const char*> header_ptrs, header_names, option_ptrs;
  header_texts.reserve(headers.size());
  for (const Header& h : headers) {
    header_texts.emplace_back(h.text);  // NVRTC wants NUL-terminated text
    header_ptrs.push_back(header_texts.back().c_str());
    header_names.push_back(h.name.c_str());
  }
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  Program program = nullptr;
  int r = create_(&program, source.c_str(), program_name.c_str(), static_cast<int>(headers.size()),
                  header_ptrs.data(), header_names.data());
  if (r != kNvrtcSuccess) return InternalError("nvrtcCreateProgram(%s): %s", program_name.c_str(), error_string_(r));
  r = compile_(program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  Status st;
  if (r != kNvrtcSuccess) {
    size_t log_bytes = 0;
    std::string log;
    if (log_size_(program, &log_bytes) == kNvrtcSuccess && log_bytes > 1) {
      log.resize(log_bytes);
      log_(program, log.data());
      log.resize(log_bytes - 1);
    }
    st = InternalError("NVRTC could not compile %s: %s\n%s", program_name.c_str(), error_string_(r), log.c_str());
  } else {
    size_t bytes = 0;
    const bool sized = (cubin ? cubin_size_(program, &bytes) : ptx_size_(program, &bytes)) == kNvrtcSuccess;
    if (!sized || bytes == 0) {
      st = InternalError("NVRTC returned no %s for %s", cubin ? "cubin" : "PTX", program_name.c_str());
    } else {
      out->resize(bytes);
      if (cubin) {
        cubin_(program, out->data());
      } else {
        ptx_(program, out->data());
        out->resize(bytes - 1);  // drop the terminating NUL
      }
    }
  }
  destroy_(&program);
  return st;
}

}  // namespace conduit::cuda
