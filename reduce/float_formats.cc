// Out-of-line entry points for the narrow-format conversions declared in reduce.h.
// The kernels use the inline versions in float_formats.h directly.
#include "reduce/float_formats.h"

#include "reduce/reduce.h"

namespace conduit {

using reduce_internal::DecodeBf16;
using reduce_internal::DecodeNarrow;
using reduce_internal::E4M3Format;
using reduce_internal::E5M2Format;
using reduce_internal::EncodeBf16;
using reduce_internal::EncodeNarrow;
using reduce_internal::HalfFormat;

float HalfToFloat(uint16_t h) { return DecodeNarrow<HalfFormat>(h); }
uint16_t FloatToHalf(float f) { return static_cast<uint16_t>(EncodeNarrow<HalfFormat>(f)); }
float Bf16ToFloat(uint16_t b) { return DecodeBf16(b); }
uint16_t FloatToBf16(float f) { return static_cast<uint16_t>(EncodeBf16(f)); }
float Fp8E4M3ToFloat(uint8_t v) { return DecodeNarrow<E4M3Format>(v); }
uint8_t FloatToFp8E4M3(float f) { return static_cast<uint8_t>(EncodeNarrow<E4M3Format>(f)); }
float Fp8E5M2ToFloat(uint8_t v) { return DecodeNarrow<E5M2Format>(v); }
uint8_t FloatToFp8E5M2(float f) { return static_cast<uint8_t>(EncodeNarrow<E5M2Format>(f)); }

}  // namespace conduit
