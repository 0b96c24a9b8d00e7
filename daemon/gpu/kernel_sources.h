// The GPU kernel source conduitd compiles with NVRTC, embedded at build time
// (embed.cmake): kKernelFiles[0] is reduce_kernels.cu, the rest the headers it includes,
// each under the name it is included by.
#ifndef CONDUIT_DAEMON_GPU_KERNEL_SOURCES_H_
#define CONDUIT_DAEMON_GPU_KERNEL_SOURCES_H_

namespace conduit::gpu {

struct EmbeddedFile {
  const char* name;
  const char* text;
};

extern const EmbeddedFile kKernelFiles[];
extern const int kKernelFileCount;

}  // namespace conduit::gpu

#endif  // CONDUIT_DAEMON_GPU_KERNEL_SOURCES_H_
