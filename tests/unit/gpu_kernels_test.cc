// The daemon's GPU combine kernels, checked without a GPU:
//  * NVRTC compiles the embedded kernel source for every type and op (what conduitd
//    does at run time on a GPU host), and each kernel the daemon will look up exists;
//  * the per-element function those kernels run (gpu/combine.h, CombineAt) is compiled
//    here for the host too and must give, bit for bit, what the host reduction path
//    (reduce/reduce.h, used by LocalStage) gives, for sampled and special inputs of every
//    type, every op (sum, prod, max, min, avg, PreMulSum) and several input counts (a NaN
//    result matches any NaN: IEEE does not fix its payload).
// The kernel and the host share the arithmetic text (reduce/element_ops.h); what this
// proves is that the kernel source is valid CUDA and composes it as the host path does.
// That a GPU executes it to the same bits is checked on a GPU (docs/gpu.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/nvrtc.h"
#include "gpu/combine.h"
#include "gpu/kernel_sources.h"
#include "gpu/reduce_kernels.h"
#include "reduce/reduce.h"

namespace conduit::gpu {
namespace {

using reduce_internal::Bf16;
using reduce_internal::E4M3Format;
using reduce_internal::E5M2Format;
using reduce_internal::HalfFormat;
using reduce_internal::NarrowFloat;
using reduce_internal::Native;

constexpr ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin};

TEST(GpuKernelsTest, SourceIsEmbedded) {
  ASSERT_GE(kKernelFileCount, 2);
  EXPECT_STREQ(kKernelFiles[0].name, "gpu/reduce_kernels.cu");
  EXPECT_NE(std::strstr(kKernelFiles[0].text, "conduit_combine_"), nullptr);
  bool has_element_ops = false;
  for (int i = 0; i < kKernelFileCount; ++i) has_element_ops |= std::strcmp(kKernelFiles[i].name, "reduce/element_ops.h") == 0;
  EXPECT_TRUE(has_element_ops);
}

TEST(GpuKernelsTest, NvrtcCompilesEveryKernel) {
  std::string why;
  const cuda::Nvrtc* nvrtc = cuda::Nvrtc::Load(&why);
  if (nvrtc == nullptr) GTEST_SKIP() << why;
  // The oldest architecture CUDA 13 targets and a current one.
  for (int cc : {75, 90}) {
    std::string ptx;
    Status st = CompileCombineKernels(*nvrtc, cc, &ptx);
    ASSERT_TRUE(st.ok()) << "compute_" << cc << ": " << st.message();
    EXPECT_NE(ptx.find(".target sm_" + std::to_string(cc)), std::string::npos);
    for (int t = 0; t < ncclNumTypes; ++t) {
      for (ncclRedOp_t op : kOps) {
        std::string name = CombineKernelName(static_cast<ncclDataType_t>(t), op);
        EXPECT_NE(ptx.find(".entry " + name + "("), std::string::npos) << name << " missing for compute_" << cc;
      }
    }
    // No fused multiply-adds: they would round differently from the host path.
    EXPECT_EQ(ptx.find("fma.rn.f32"), std::string::npos);
  }
}

// What the daemon loads: machine code, so the driver compiles nothing (docs/gpu.md).
TEST(GpuKernelsTest, NvrtcCompilesEveryKernelToMachineCode) {
  std::string why;
  const cuda::Nvrtc* nvrtc = cuda::Nvrtc::Load(&why);
  if (nvrtc == nullptr) GTEST_SKIP() << why;
  if (!nvrtc->has_cubin()) GTEST_SKIP() << nvrtc->path() << " predates cubin output";
  for (int cc : {90}) {  // one architecture: ptxas is the slow part, and PTX covers both above
    std::string cubin;
    Status st = CompileCombineCubin(*nvrtc, cc, &cubin);
    ASSERT_TRUE(st.ok()) << "sm_" << cc << ": " << st.message();
    ASSERT_GT(cubin.size(), 4u);
    EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF", 4)) << "not an ELF image for sm_" << cc;
    for (int t = 0; t < ncclNumTypes; ++t) {
      for (ncclRedOp_t op : kOps) {
        std::string name = CombineKernelName(static_cast<ncclDataType_t>(t), op);
        EXPECT_NE(cubin.find(name + '\0'), std::string::npos) << name << " missing for sm_" << cc;
      }
    }
  }
}

TEST(GpuKernelsTest, KernelNames) {
  EXPECT_EQ(CombineKernelName(ncclFloat32, ncclSum), "conduit_combine_float32_sum");
  EXPECT_EQ(CombineKernelName(ncclBfloat16, ncclAvg), "conduit_combine_bfloat16_sum");
  EXPECT_EQ(CombineKernelName(ncclFloat8e5m2, ncclMin), "conduit_combine_float8e5m2_min");
  EXPECT_EQ(CombineKernelName(ncclUint64, static_cast<ncclRedOp_t>(ncclNumOps)), "conduit_combine_uint64_sum");
}

// Random bit patterns plus the values where rounding and NaN handling differ.
std::vector<uint8_t> Sample(ncclDataType_t type, size_t n, std::mt19937_64& rng) {
  const size_t elem = DataTypeSize(type);
  std::vector<uint8_t> bytes(n * elem);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  auto put = [&](size_t i, uint64_t bits) { memcpy(bytes.data() + i * elem, &bits, elem); };
  const bool is_float = type >= ncclFloat16;
  if (!is_float || n < 16) return bytes;
  // Zeros of both signs, one, infinities (or the largest value), NaNs with payloads,
  // the smallest subnormal and normal, the largest finite values, a value that rounds.
  std::vector<uint64_t> special;
  switch (type) {
    case ncclFloat8e4m3: special = {0x00, 0x80, 0x38, 0x7e, 0xfe, 0x7f, 0xff, 0x01, 0x07, 0x08, 0x81, 0x39, 0x77}; break;
    case ncclFloat8e5m2: special = {0x00, 0x80, 0x3c, 0x7c, 0xfc, 0x7e, 0x7f, 0x01, 0x03, 0x04, 0x7b, 0xfb, 0x3d}; break;
    case ncclFloat16: special = {0x0000, 0x8000, 0x3c00, 0x7c00, 0xfc00, 0x7e00, 0x7e01, 0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3555}; break;
    case ncclBfloat16: special = {0x0000, 0x8000, 0x3f80, 0x7f80, 0xff80, 0x7fc0, 0x7fc1, 0x0001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3eab}; break;
    case ncclFloat32:
      special = {0x00000000, 0x80000000, 0x3f800000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7fc00001,
                 0x00000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3eaaaaab};
      break;
    default:
      special = {0, 0x8000000000000000, 0x3ff0000000000000, 0x7ff0000000000000, 0xfff0000000000000,
                 0x7ff8000000000000, 0x7ff8000000000001, 1, 0x000fffffffffffff, 0x0010000000000000,
                 0x7fefffffffffffff, 0xffefffffffffffff, 0x3fd5555555555555};
      break;
  }
  for (size_t k = 0; k < special.size(); ++k) put(k * 7 % n, special[k]);
  return bytes;
}

// IEEE leaves the payload and sign of a NaN result unspecified: they depend on operand
// order the compiler may swap (and GPUs return one canonical NaN). A NaN matches a NaN.
bool IsNaN(ncclDataType_t type, uint64_t bits) {
  switch (type) {
    case ncclFloat16: return std::isnan(HalfToFloat(static_cast<uint16_t>(bits)));
    case ncclBfloat16: return std::isnan(Bf16ToFloat(static_cast<uint16_t>(bits)));
    case ncclFloat8e4m3: return std::isnan(Fp8E4M3ToFloat(static_cast<uint8_t>(bits)));
    case ncclFloat8e5m2: return std::isnan(Fp8E5M2ToFloat(static_cast<uint8_t>(bits)));
    case ncclFloat32: return (bits & 0x7fffffffu) > 0x7f800000u;
    case ncclFloat64: return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return false;
  }
}

// The host path: LocalStage scales each PreMulSum input in place, reduces the others
// into the first (accumulator on the left), and divides ncclAvg once at the end.
std::vector<uint8_t> HostPath(ncclDataType_t type, ncclRedOp_t op, std::vector<std::vector<uint8_t>> in, size_t n,
                              bool premul, const std::vector<uint64_t>& scalars, int divisor) {
  const ncclRedOp_t combine = op == ncclAvg || premul ? ncclSum : op;
  for (size_t r = 0; r < in.size(); ++r) {
    if (premul) ScaleInPlace(in[r].data(), n, type, &scalars[r]);
  }
  std::vector<uint8_t> acc = in[0];
  for (size_t r = 1; r < in.size(); ++r) ReduceInto(acc.data(), in[r].data(), n, type, combine);
  if (op == ncclAvg) DivideInPlace(acc.data(), n, type, divisor);
  return acc;
}

template <typename E, typename Op>
std::vector<uint8_t> KernelPath(const CombineArgs& args) {
  using S = typename E::Storage;
  std::vector<uint8_t> out(args.count * sizeof(S));
  for (uint64_t i = 0; i < args.count; ++i) {
    S v = CombineAt<E, Op>(args, i);
    memcpy(out.data() + i * sizeof(S), &v, sizeof(S));
  }
  return out;
}

template <typename E>
std::vector<uint8_t> KernelPathFor(ncclRedOp_t op, const CombineArgs& args) {
  switch (op) {
    case ncclProd: return KernelPath<E, reduce_internal::ProdOp>(args);
    case ncclMax: return KernelPath<E, reduce_internal::MaxOp>(args);
    case ncclMin: return KernelPath<E, reduce_internal::MinOp>(args);
    default: return KernelPath<E, reduce_internal::SumOp>(args);
  }
}

std::vector<uint8_t> KernelPathForType(ncclDataType_t type, ncclRedOp_t op, const CombineArgs& args) {
  switch (type) {
    case ncclInt8: return KernelPathFor<Native<int8_t>>(op, args);
    case ncclUint8: return KernelPathFor<Native<uint8_t>>(op, args);
    case ncclInt32: return KernelPathFor<Native<int32_t>>(op, args);
    case ncclUint32: return KernelPathFor<Native<uint32_t>>(op, args);
    case ncclInt64: return KernelPathFor<Native<int64_t>>(op, args);
    case ncclUint64: return KernelPathFor<Native<uint64_t>>(op, args);
    case ncclFloat16: return KernelPathFor<NarrowFloat<HalfFormat, uint16_t>>(op, args);
    case ncclFloat32: return KernelPathFor<Native<float>>(op, args);
    case ncclFloat64: return KernelPathFor<Native<double>>(op, args);
    case ncclBfloat16: return KernelPathFor<Bf16>(op, args);
    case ncclFloat8e4m3: return KernelPathFor<NarrowFloat<E4M3Format, uint8_t>>(op, args);
    default: return KernelPathFor<NarrowFloat<E5M2Format, uint8_t>>(op, args);
  }
}

TEST(GpuKernelsTest, CombineEqualsHostPathBitForBit) {
  std::mt19937_64 rng(20240905);
  constexpr size_t kCount = 4099;
  int cases = 0;
  for (int t = 0; t < ncclNumTypes; ++t) {
    const auto type = static_cast<ncclDataType_t>(t);
    const size_t elem = DataTypeSize(type);
    // Sum, prod, max, min, avg, and PreMulSum (as ncclNumOps).
    for (int o = 0; o <= ncclNumOps; ++o) {
      const auto op = static_cast<ncclRedOp_t>(o);
      const bool premul = o == ncclNumOps;
      for (int nin : {1, 2, 3, 5, kCombineSlots}) {
        std::vector<std::vector<uint8_t>> in;
        std::vector<uint64_t> scalars(nin, 0);
        CombineArgs args{};
        args.count = kCount;
        args.nin = nin;
        args.nout = 0;
        args.divisor = op == ncclAvg ? nin + 2 : 0;  // as with ranks on other hosts
        for (int r = 0; r < nin; ++r) {
          in.push_back(Sample(type, kCount, rng));
          // A scalar from the same distribution, so it too may be NaN, zero, huge, ...
          std::vector<uint8_t> s = Sample(type, 1, rng);
          memcpy(&scalars[r], s.data(), elem);
          if (premul) args.scale_mask |= 1u << r;
          args.scalars[r] = scalars[r];
        }
        for (int r = 0; r < nin; ++r) args.in[r] = in[r].data();
        std::vector<uint8_t> want = HostPath(type, op, in, kCount, premul, scalars, args.divisor);
        std::vector<uint8_t> got = KernelPathForType(type, op, args);
        ASSERT_EQ(got.size(), want.size());
        for (size_t e = 0; e < kCount; ++e) {
          uint64_t g = 0, w = 0;
          memcpy(&g, got.data() + e * elem, elem);
          memcpy(&w, want.data() + e * elem, elem);
          if (g == w || (IsNaN(type, g) && IsNaN(type, w))) continue;
          ADD_FAILURE() << DataTypeName(type) << " op " << o << " nin " << nin << ": element " << e << " got 0x"
                        << std::hex << g << " want 0x" << w;
          break;
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, ncclNumTypes * (ncclNumOps + 1) * 5);
}

}  // namespace
}  // namespace conduit::gpu
