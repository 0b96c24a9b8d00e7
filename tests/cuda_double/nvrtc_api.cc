// NVRTC's entry points as cuda/nvrtc.cc loads them. The double compiles nothing: a
// program "compiles" when its source defines the daemon's combine kernels, and its
// output (PTX or cubin alike) is an image the double's cuModuleLoadData accepts, which
// holds every kernel the double knows (double_kernels.h). Kernel source is checked by
// gpu_kernels_test with the real NVRTC wherever one is installed.
#include <cstring>
#include <string>

#include "double_kernels.h"

namespace {

constexpr int kSuccess = 0;
constexpr int kErrorInvalidInput = 3;
constexpr int kErrorInvalidProgram = 4;
constexpr int kErrorCompilation = 6;

struct Program {
  std::string source;
  std::string log;
  bool compiled = false;
};

Program* AsProgram(void* p) { return static_cast<Program*>(p); }

int Output(void* prog, size_t* size, char* out) {
  Program* p = AsProgram(prog);
  if (p == nullptr) return kErrorInvalidProgram;
  if (!p->compiled) return kErrorInvalidInput;
  if (size != nullptr) *size = sizeof(cuda_double::kModuleImage);
  if (out != nullptr) memcpy(out, cuda_double::kModuleImage, sizeof(cuda_double::kModuleImage));
  return kSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvrtcVersion(int* major, int* minor) {
  if (major == nullptr || minor == nullptr) return kErrorInvalidInput;
  *major = 13;
  *minor = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) const char* nvrtcGetErrorString(int result) {
  switch (result) {
    case kSuccess: return "NVRTC_SUCCESS";
    case kErrorInvalidInput: return "NVRTC_ERROR_INVALID_INPUT";
    case kErrorInvalidProgram: return "NVRTC_ERROR_INVALID_PROGRAM";
    case kErrorCompilation: return "NVRTC_ERROR_COMPILATION";
    default: return "NVRTC_ERROR unknown";
  }
}

__attribute__((visibility("default"))) int nvrtcCreateProgram(void** prog, const char* source, const char*, int,
                                                              const char* const*, const char* const*) {
  if (prog == nullptr || source == nullptr) return kErrorInvalidInput;
  *prog = new Program{source, "", false};
  return kSuccess;
}

__attribute__((visibility("default"))) int nvrtcDestroyProgram(void** prog) {
  if (prog == nullptr || *prog == nullptr) return kErrorInvalidProgram;
  delete AsProgram(*prog);
  *prog = nullptr;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvrtcCompileProgram(void* prog, int, const char* const*) {
  Program* p = AsProgram(prog);
  if (p == nullptr) return kErrorInvalidProgram;
  if (p->source.find("conduit_combine_") == std::string::npos) {
    p->log = "cuda double: the source defines no conduit_combine_ kernel";
    return kErrorCompilation;
  }
  p->compiled = true;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvrtcGetPTXSize(void* prog, size_t* size) { return Output(prog, size, nullptr); }
__attribute__((visibility("default"))) int nvrtcGetPTX(void* prog, char* out) { return Output(prog, nullptr, out); }
__attribute__((visibility("default"))) int nvrtcGetCUBINSize(void* prog, size_t* size) { return Output(prog, size, nullptr); }
__attribute__((visibility("default"))) int nvrtcGetCUBIN(void* prog, char* out) { return Output(prog, nullptr, out); }

__attribute__((visibility("default"))) int nvrtcGetProgramLogSize(void* prog, size_t* size) {
  Program* p = AsProgram(prog);
  if (p == nullptr || size == nullptr) return kErrorInvalidProgram;
  *size = p->log.size() + 1;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvrtcGetProgramLog(void* prog, char* out) {
  Program* p = AsProgram(prog);
  if (p == nullptr || out == nullptr) return kErrorInvalidProgram;
  memcpy(out, p->log.c_str(), p->log.size() + 1);
  return kSuccess;
}

}  // extern "C"
