// The run-time loaders for the CUDA driver and NVRTC: on a host without a driver they
// report "absent" with a reason and nothing else breaks; where a driver or NVRTC exists
// they load and work.
#include <gtest/gtest.h>
#include <unistd.h>

#include "cuda/cuda_driver.h"
#include "cuda/nvrtc.h"

namespace conduit::cuda {
namespace {

TEST(CudaDriverTest, LoadsOrReportsAbsent) {
  std::string why;
  const CudaDriver* d = CudaDriver::Load(&why);
  if (d == nullptr) {
    // A host without the driver (CI, this project's build machines).
    EXPECT_NE(why.find("libcuda.so.1"), std::string::npos) << why;
    EXPECT_EQ(CudaDriver::IfLoaded(), nullptr) << "no driver in the process, yet IfLoaded found one";
    // Asking again gives the same answer without retrying.
    std::string again;
    EXPECT_EQ(CudaDriver::Load(&again), nullptr);
    EXPECT_EQ(again, why);
    return;
  }
  EXPECT_GT(d->version(), 0);
  int count = -1;
  // cuInit succeeded, so the driver answers queries (a host may still have 0 devices).
  EXPECT_EQ(d->DeviceGetCount(&count), kSuccess);
  EXPECT_GE(count, 0);
  // Load() brought the driver into the process, so the shim's probe now finds it.
  EXPECT_NE(CudaDriver::IfLoaded(), nullptr);
}

TEST(CudaDriverTest, MissingLibraryIsAbsent) {
  std::string why;
  EXPECT_EQ(CudaDriver::LoadFrom("/nonexistent/libcuda.so.1", &why), nullptr);
  EXPECT_EQ(why.rfind("CUDA driver absent: cannot load /nonexistent/libcuda.so.1", 0), 0u) << why;
}

TEST(CudaDriverTest, LibraryWithoutTheApiIsRefused) {
  std::string why;
  EXPECT_EQ(CudaDriver::LoadFrom("libm.so.6", &why), nullptr);
  EXPECT_NE(why.find("lacks cuInit"), std::string::npos) << why;
}

TEST(NvrtcTest, CompilesOrReportsAbsent) {
  std::string why;
  const Nvrtc* n = Nvrtc::Load(&why);
  if (n == nullptr) {
    EXPECT_NE(why.find("NVRTC absent"), std::string::npos) << why;
    GTEST_SKIP() << why;
  }
  EXPECT_GE(n->major(), 11) << n->path();
  std::string ptx;
  Status st = n->CompileToPtx("probe.cu",
                              "#include \"probe.h\"\n"
                              "extern \"C\" __global__ void probe(float* x) { x[threadIdx.x] *= kFactor; }\n",
                              {{"probe.h", "constexpr float kFactor = 2.0f;\n"}}, {"--gpu-architecture=compute_75"},
                              &ptx);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(ptx.find(".entry probe"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find('\0'), std::string::npos);
}

TEST(NvrtcTest, CompileErrorCarriesTheLog) {
  const Nvrtc* n = Nvrtc::Load(nullptr);
  if (n == nullptr) GTEST_SKIP() << "NVRTC absent";
  std::string ptx;
  Status st = n->CompileToPtx("broken.cu", "__global__ void k() { undeclared_thing(); }\n", {},
                              {"--gpu-architecture=compute_75"}, &ptx);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ncclInternalError);
  EXPECT_NE(st.message().find("undeclared_thing"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace conduit::cuda
