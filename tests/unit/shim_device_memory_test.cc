// The shim's buffer classification (libmccs-nccl/device_memory.h) in a process that has
// not loaded the CUDA driver, as every CPU-only program is: all buffers must be host
// memory, so the host path stays exactly as it was, and asking must not load the driver.
#include <gtest/gtest.h>
#include <dlfcn.h>

#include <vector>

#include "device_memory.h"

namespace conduit {
namespace {

bool DriverInProcess() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

TEST(ShimDeviceMemoryTest, EveryBufferIsHostWithoutTheDriver) {
  if (DriverInProcess()) GTEST_SKIP() << "libcuda.so.1 already loaded in this process";
  EXPECT_EQ(ProcessCuda(), nullptr);
  std::vector<float> heap(1024);
  int stack = 0;
  for (const void* p : {static_cast<const void*>(heap.data()), static_cast<const void*>(&stack),
                        static_cast<const void*>(nullptr)}) {
    BufferInfo info;
    info.kind = MemoryKind::kDevice;  // must be overwritten
    info.buffer_id = 7;
    info.device = 3;
    Status st = ClassifyBuffer(p, &info);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(info.kind, MemoryKind::kHost);
    EXPECT_EQ(info.buffer_id, 0u);
    EXPECT_EQ(info.device, -1);
    EXPECT_EQ(info.context, nullptr);
  }
  // The shim only uses a driver the program already loaded: classifying must not load it.
  EXPECT_FALSE(DriverInProcess());
}

}  // namespace
}  // namespace conduit
