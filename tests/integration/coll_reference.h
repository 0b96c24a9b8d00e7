// Deterministic inputs and the results every rank expects, computed independently of the
// library under test: integers in 64-bit modular arithmetic (bit-exact after truncation,
// like NCCL's wrapping integer reductions), floats in double.
//
// Inputs are small integers so float sums stay exactly representable whenever the sum of
// magnitudes fits the type's exact-integer range; then any reduction order gives the same
// bits and we compare exactly. Otherwise (fp8 with many ranks, avg) we allow a tolerance
// scaled by the type's epsilon and the number of rounding steps.
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_REFERENCE_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "coll_dtype.h"
#include "coll_options.h"

namespace conduit::it {

struct Expect {
  uint64_t bits = 0;  // integer types: expected raw bits
  double value = 0;   // float types: expected value
  double tol = 0;     // float types: allowed |got - value| when !exact
  bool exact = true;
};

class Pattern {
 public:
  // op picks the input range (prod needs {1,2} or {-1,1}, avg non-negative integers);
  // collectives without a reduction pass Op::kSum.
  Pattern(const TypeInfo& type, Op op, uint64_t case_seed, int nranks);

  int64_t Value(int rank, size_t index) const;
  // Writes Value(rank, first + k) for k in [0, n) as elements of the type into dst.
  void Fill(void* dst, int rank, size_t first, size_t n) const;
  // The PreMulSum scalar rank `rank` passes (small so products stay exact).
  int64_t Scalar(int rank) const { return rank % 3 + 1; }

  Expect Copy(int rank, size_t index) const;  // an element moved unchanged
  Expect Reduce(size_t index) const;          // op over all ranks of Value(r, index)

  bool Matches(const void* elem, const Expect& e) const;
  std::string Got(const void* elem) const;
  std::string Want(const Expect& e) const;

  const TypeInfo& type() const { return type_; }

 private:
  const TypeInfo& type_;
  Op op_;
  uint64_t seed_;
  int nranks_;
  int64_t lo_ = 0;
  int64_t hi_ = 0;
  bool pow2_ = false;  // prod inputs in {1,2}, encoded as lo_=0..hi_=1 exponents
  bool sign_ = false;  // prod inputs in {-1,1}
};

// Mixes several integers into one well-distributed 64-bit value (splitmix64 steps).
uint64_t Mix(uint64_t a, uint64_t b);

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_REFERENCE_H_
