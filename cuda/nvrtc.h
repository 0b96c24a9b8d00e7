// Nvrtc: NVIDIA's run-time CUDA C++ compiler (libnvrtc), loaded at run time.
//
// The daemon compiles its reduction kernels from source it carries (gpu/reduce_kernels)
// for the GPU it finds, so its binary needs no CUDA toolchain at build time and no
// per-architecture fatbin. NVRTC itself needs no GPU: tests compile every kernel here.
#ifndef CONDUIT_DAEMON_CUDA_NVRTC_H_
#define CONDUIT_DAEMON_CUDA_NVRTC_H_

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace conduit::cuda {

class Nvrtc {
 public:
  // A header the source may #include by `name`, given as text (NVRTC reads no files).
  struct Header {
    std::string name;
    std::string_view text;
  };

  // Loads $CONDUIT_NVRTC, else the first of libnvrtc.so.13/.12/.11.2/.so found on the
  // library path or in /usr/local/cuda/lib64, once per process. nullptr and *why when
  // there is none.
  static const Nvrtc* Load(std::string* why);

  // Compiles `source` to PTX with `options` (e.g. "--gpu-architecture=compute_80").
  // A failed compile is ncclInternalError carrying the compiler's log.
  Status CompileToPtx(const std::string& program_name, const std::string& source, const std::vector<Header>& headers,
                      const std::vector<std::string>& options, std::string* ptx) const;
  // Compiles to machine code (an ELF cubin) for one real architecture ("--gpu-architecture=
  // sm_90"), which the driver loads as is: nothing is left to its JIT, which may be older
  // than this compiler. Fails when this NVRTC predates cubin output (has_cubin()).
  Status CompileToCubin(const std::string& program_name, const std::string& source,
                        const std::vector<Header>& headers, const std::vector<std::string>& options,
                        std::string* cubin) const;
  bool has_cubin() const { return cubin_size_ != nullptr && cubin_ != nullptr; }

  int major() const { return major_; }
  int minor() const { return minor_; }
  const std::string& path() const { return path_; }

 private:
  using Program = struct Program_*;
  int (*version_)(int*, int*) = nullptr;
  const char* (*error_string_)(int) = nullptr;
  int (*create_)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy_)(Program*) = nullptr;
  int (*compile_)(Program, int, const char* const*) = nullptr;
  int (*ptx_size_)(Program, size_t*) = nullptr;
  int (*ptx_)(Program, char*) = nullptr;
  int (*log_size_)(Program, size_t*) = nullptr;
  int (*log_)(Program, char*) = nullptr;
  int (*cubin_size_)(Program, size_t*) = nullptr;  // optional: NVRTC 11.1 and later
  int (*cubin_)(Program, char*) = nullptr;

  Status Compile(const std::string& program_name, const std::string& source, const std::vector<Header>& headers,
                 const std::vector<std::string>& options, bool cubin, std::string* out) const;

  int major_ = 0, minor_ = 0;
  std::string path_;
};

}  // namespace conduit::cuda

#endif  // CONDUIT_DAEMON_CUDA_NVRTC_H_
