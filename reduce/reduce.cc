#include "reduce/reduce.h"

#if defined(CONDUIT_REDUCE_X86_KERNELS)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "reduce/kernel_table.h"

// The loops themselves are in kernel_loops.inc, compiled once per instruction set;
// this file picks the fastest set the CPU supports, once, and dispatches to it.

namespace conduit {
namespace {

using reduce_internal::CombineFn;
using reduce_internal::Kernels;

const Kernels* TableFor(ReduceIsa isa) {
  switch (isa) {
    case ReduceIsa::kBaseline: return reduce_internal::kKernelsBaseline;
#if defined(CONDUIT_REDUCE_X86_KERNELS)
    case ReduceIsa::kAvx2: return reduce_internal::kKernelsAvx2;
    case ReduceIsa::kAvx512: return reduce_internal::kKernelsAvx512;
#endif
    default: return nullptr;
  }
}

#if defined(CONDUIT_REDUCE_X86_KERNELS)
// What CPUID and XCR0 say, read directly: compilers disagree on which feature names
// __builtin_cpu_supports knows (clang 14 has no "f16c").
struct X86Features {
  bool avx2_f16c = false;
  bool avx512 = false;  // F, BW, DQ and VL
};

X86Features ReadX86Features() {
  X86Features f;
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return f;
  const bool osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  // The vector registers count only where the kernel saves them across switches (XCR0).
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_saved = (xcr0_lo & 0x6u) == 0x6u;
  const bool zmm_saved = (xcr0_lo & 0xe6u) == 0xe6u;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return f;
  const bool avx2 = ebx & (1u << 5);
  const bool avx512 = (ebx & (1u << 16)) && (ebx & (1u << 17)) && (ebx & (1u << 30)) && (ebx & (1u << 31));
  f.avx2_f16c = ymm_saved && avx2 && f16c;
  f.avx512 = f.avx2_f16c && zmm_saved && avx512;
  return f;
}
#endif

bool CpuRuns(ReduceIsa isa) {
#if defined(CONDUIT_REDUCE_X86_KERNELS)
  static const X86Features features = ReadX86Features();
  switch (isa) {
    case ReduceIsa::kBaseline: return true;
    case ReduceIsa::kAvx2: return features.avx2_f16c;
    case ReduceIsa::kAvx512: return features.avx512;
  }
  return false;
#else
  return isa == ReduceIsa::kBaseline;
#endif
}

// The best the CPU runs, or a lower one named by CONDUIT_REDUCE_ISA (A/B runs, and a
// way around a CPU that misreports). A name that is unknown or not runnable here is
// ignored, with one line on stderr, since nothing else could be logged this early.
ReduceIsa ChooseIsa() {
  ReduceIsa best = ReduceIsa::kBaseline;
  for (ReduceIsa isa : {ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
    if (ReduceIsaAvailable(isa)) best = isa;
  }
  const char* want = getenv("CONDUIT_REDUCE_ISA");
  if (want == nullptr || *want == '\0') return best;
  for (ReduceIsa isa : {ReduceIsa::kBaseline, ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
    if (strcmp(want, ReduceIsaName(isa)) == 0 && ReduceIsaAvailable(isa)) return isa;
  }
  fprintf(stderr, "conduit: CONDUIT_REDUCE_ISA=%s is not one this CPU runs (baseline, avx2, avx512); using %s\n",
          want, ReduceIsaName(best));
  return best;
}

// The table in use; the set it belongs to is derived from it (ActiveReduceIsa).
std::atomic<const Kernels*>& ActiveTable() {
  static std::atomic<const Kernels*> table{TableFor(ChooseIsa())};
  return table;
}

const Kernels* Table() { return ActiveTable().load(std::memory_order_relaxed); }

// ncclAvg accumulates like ncclSum; the caller divides once at the end.
CombineFn FindCombine(ncclDataType_t type, ncclRedOp_t op) {
  if (!IsValidDataType(type)) return nullptr;
  const int index = op == ncclAvg ? static_cast<int>(ncclSum) : static_cast<int>(op);
  if (index < 0 || index > static_cast<int>(ncclMin)) return nullptr;
  return Table()[type].combine[index];
}

}  // namespace

size_t DataTypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* DataTypeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "invalid";
  }
}

bool IsValidDataType(int type) { return type >= 0 && type < ncclNumTypes; }

const char* ReduceIsaName(ReduceIsa isa) {
  switch (isa) {
    case ReduceIsa::kBaseline: return "baseline";
    case ReduceIsa::kAvx2: return "avx2";
    case ReduceIsa::kAvx512: return "avx512";
  }
  return "invalid";
}

bool ReduceIsaAvailable(ReduceIsa isa) { return TableFor(isa) != nullptr && CpuRuns(isa); }

ReduceIsa ActiveReduceIsa() {
  const Kernels* table = Table();
  for (ReduceIsa isa : {ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
    if (table == TableFor(isa)) return isa;
  }
  return ReduceIsa::kBaseline;
}

bool SetReduceIsa(ReduceIsa isa) {
  if (!ReduceIsaAvailable(isa)) return false;
  ActiveTable().store(TableFor(isa), std::memory_order_relaxed);
  return true;
}

// Invalid types or ops are ignored rather than fatal: the daemon validates every
// request up front (IsValidDataType), and a bad value here must not take it down.
void ReduceInto(void* acc, const void* in, size_t count, ncclDataType_t type, ncclRedOp_t op) {
  if (count == 0) return;
  if (CombineFn fn = FindCombine(type, op)) fn(acc, acc, in, count);
}

void Reduce2(void* out, const void* a, const void* b, size_t count, ncclDataType_t type,
             ncclRedOp_t op) {
  if (count == 0) return;
  if (CombineFn fn = FindCombine(type, op)) fn(out, a, b, count);
}

void ScaleInPlace(void* buf, size_t count, ncclDataType_t type, const void* scalar) {
  if (count == 0 || !IsValidDataType(type)) return;
  Table()[type].scale(buf, count, scalar);
}

void DivideInPlace(void* buf, size_t count, ncclDataType_t type, int divisor) {
  if (count == 0 || !IsValidDataType(type)) return;
  Table()[type].divide(buf, count, divisor);
}

}  // namespace conduit
