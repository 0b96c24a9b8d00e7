// Plain numbers on the command line of the bench tools (counts, KiB, seconds), read whole:
// "12x", "", "-3" and out-of-range values are refused, where atoi/strtoull would quietly
// take a prefix, wrap a negative number or saturate. Sizes with K/M/G are cli/size_arg.h's.
#ifndef CONDUIT_TOOLS_CLI_NUMBER_ARG_H_
#define CONDUIT_TOOLS_CLI_NUMBER_ARG_H_

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace conduit::tools {

// A decimal integer in [lo, hi]; false for anything else.
inline bool ParseIntArg(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  if (text == nullptr || !(std::isdigit(static_cast<unsigned char>(*text)) || *text == '-')) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// A number (fractions allowed) in (lo, hi] when lo_open, else [lo, hi]; false for anything else.
inline bool ParseRealArg(const char* text, double lo, double hi, bool lo_open, double* out) {
  if (text == nullptr || *text == '\0' || std::isspace(static_cast<unsigned char>(*text))) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !std::isfinite(v)) return false;
  if (v > hi || v < lo || (lo_open && v == lo)) return false;
  *out = v;
  return true;
}

}  // namespace conduit::tools

#endif  // CONDUIT_TOOLS_CLI_NUMBER_ARG_H_
