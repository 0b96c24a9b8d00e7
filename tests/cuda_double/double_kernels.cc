#include "double_kernels.h"

#include <time.h>

#include <cstring>
#include <map>
#include <string>

#include "double_errors.h"
#include "double_memory.h"
#include "gpu/combine.h"
#include "gpu_access.h"

namespace cuda_double {

using Launcher = CUresult (*)(Stream& stream, void** params);

struct Function {
  Launcher launch;
};

namespace {

using conduit::gpu::CombineArgs;
using conduit::gpu::kCombineSlots;
using namespace conduit::reduce_internal;
using Half = NarrowFloat<HalfFormat, uint16_t>;
using E4M3 = NarrowFloat<E4M3Format, uint8_t>;
using E5M2 = NarrowFloat<E5M2Format, uint8_t>;

void SleepMs(uint32_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

// The combine kernel: every buffer translated to the double's view and bounds-checked
// when launched (a GPU would fault on an address outside an allocation).
template <typename E, typename Op>
CUresult LaunchCombine(Stream& stream, void** params) {
  using S = typename E::Storage;
  if (params == nullptr || params[0] == nullptr) return conduit::cuda::kErrorInvalidValue;
  CombineArgs a;
  memcpy(&a, params[0], sizeof(a));
  if (a.nin < 1 || a.nin > kCombineSlots || a.nout < 0 || a.nout > kCombineSlots) {
    return conduit::cuda::kErrorInvalidValue;
  }
  const size_t bytes = a.count * sizeof(S);
  // Device memory among the inputs or outputs: those accesses are the GPU's (gpu_access.h).
  bool device_in = false, device_out = false;
  auto is_device = [](const void* p) {
    return Describe(reinterpret_cast<uint64_t>(p)).memory_type == conduit::cuda::kMemoryTypeDevice;
  };
  for (int r = 0; r < a.nin; ++r) device_in |= is_device(a.in[r]) || (a.scalar_at[r] != nullptr && is_device(a.scalar_at[r]));
  for (int o = 0; o < a.nout; ++o) device_out |= is_device(a.out[o]);
  for (int r = 0; r < a.nin; ++r) {
    a.in[r] = HostView(reinterpret_cast<uint64_t>(a.in[r]), bytes);
    if (a.in[r] == nullptr) return kErrorIllegalAddress;
  }
  for (int o = 0; o < a.nout; ++o) {
    a.out[o] = HostView(reinterpret_cast<uint64_t>(a.out[o]), bytes);
    if (a.out[o] == nullptr) return kErrorIllegalAddress;
  }
  for (int r = 0; r < a.nin; ++r) {
    if (a.scalar_at[r] == nullptr) continue;
    a.scalar_at[r] = HostView(reinterpret_cast<uint64_t>(a.scalar_at[r]), sizeof(S));
    if (a.scalar_at[r] == nullptr) return kErrorIllegalAddress;
  }
  stream.Enqueue([a, device_in, device_out] {
    GpuAccess gpu(device_in, device_out);
    for (uint64_t i = 0; i < a.count; ++i) {
      const S v = conduit::gpu::CombineAt<E, Op>(a, i);
      for (int o = 0; o < a.nout; ++o) static_cast<S*>(a.out[o])[i] = v;
    }
    return conduit::cuda::kSuccess;
  });
  return conduit::cuda::kSuccess;
}

CUresult LaunchFill(Stream& stream, void** params) {
  if (params == nullptr) return conduit::cuda::kErrorInvalidValue;
  uint64_t dst, count;
  float first, step;
  uint32_t delay_ms;
  memcpy(&dst, params[0], sizeof(dst));
  memcpy(&count, params[1], sizeof(count));
  memcpy(&first, params[2], sizeof(first));
  memcpy(&step, params[3], sizeof(step));
  memcpy(&delay_ms, params[4], sizeof(delay_ms));
  auto* out = reinterpret_cast<float*>(HostView(dst, count * sizeof(float)));
  if (out == nullptr) return kErrorIllegalAddress;
  const bool device = Describe(dst).memory_type == conduit::cuda::kMemoryTypeDevice;
  stream.Enqueue([=] {
    SleepMs(delay_ms);  // a long kernel: whatever waits on this stream must wait for it
    GpuAccess gpu(false, device);
    for (uint64_t i = 0; i < count; ++i) out[i] = first + step * static_cast<float>(i);
    return conduit::cuda::kSuccess;
  });
  return conduit::cuda::kSuccess;
}

CUresult LaunchSpin(Stream& stream, void** params) {
  if (params == nullptr) return conduit::cuda::kErrorInvalidValue;
  uint32_t ms;
  memcpy(&ms, params[0], sizeof(ms));
  stream.Enqueue([ms] {
    SleepMs(ms);
    return conduit::cuda::kSuccess;
  });
  return conduit::cuda::kSuccess;
}

using Table = std::map<std::string, Function>;

template <typename E>
void AddCombine(Table* t, const char* type) {
  const std::string prefix = std::string("conduit_combine_") + type + "_";
  (*t)[prefix + "sum"] = Function{&LaunchCombine<E, SumOp>};
  (*t)[prefix + "prod"] = Function{&LaunchCombine<E, ProdOp>};
  (*t)[prefix + "max"] = Function{&LaunchCombine<E, MaxOp>};
  (*t)[prefix + "min"] = Function{&LaunchCombine<E, MinOp>};
}

// Type names as DataTypeName() spells them (reduce/reduce.h), as reduce_kernels.cu does.
const Table& Functions() {
  static const Table* table = [] {
    auto* t = new Table;
    AddCombine<Native<int8_t>>(t, "int8");
    AddCombine<Native<uint8_t>>(t, "uint8");
    AddCombine<Native<int32_t>>(t, "int32");
    AddCombine<Native<uint32_t>>(t, "uint32");
    AddCombine<Native<int64_t>>(t, "int64");
    AddCombine<Native<uint64_t>>(t, "uint64");
    AddCombine<Half>(t, "float16");
    AddCombine<Native<float>>(t, "float32");
    AddCombine<Native<double>>(t, "float64");
    AddCombine<Bf16>(t, "bfloat16");
    AddCombine<E4M3>(t, "float8e4m3");
    AddCombine<E5M2>(t, "float8e5m2");
    (*t)["conduit_double_fill_float32"] = Function{&LaunchFill};
    (*t)["conduit_double_spin"] = Function{&LaunchSpin};
    return t;
  }();
  return *table;
}

}  // namespace

bool IsModuleImage(const void* image) {
  return image != nullptr && strncmp(static_cast<const char*>(image), kModuleImage, sizeof(kModuleImage) - 1) == 0;
}

Function* FindFunction(const char* name) {
  if (name == nullptr) return nullptr;
  const Table& t = Functions();
  auto it = t.find(name);
  return it == t.end() ? nullptr : const_cast<Function*>(&it->second);
}

CUresult Launch(const Function& fn, Stream& stream, void** params) { return fn.launch(stream, params); }

}  // namespace cuda_double
