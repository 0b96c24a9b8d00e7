// Sizes on the command line as nccl-tests reads them: a number (fractions allowed), then
// optionally K, M or G (powers of 1024, either case), and a trailing B ("128MB") taken too.
// conduit-perf's -b/-e/-f and conduit-copy-bench's --sizes.
#ifndef CONDUIT_TOOLS_CLI_SIZE_ARG_H_
#define CONDUIT_TOOLS_CLI_SIZE_ARG_H_

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdlib>

namespace conduit::tools {

// False for anything else, negative numbers and sizes from 2^62 up.
inline bool ParseSizeArg(const char* text, size_t* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  double mult = 1;
  if (errno != 0 || end == text || !std::isfinite(v) || v < 0) return false;
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; ++end; break;
    case 'm': case 'M': mult = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || !(v * mult < 0x1p62)) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

}  // namespace conduit::tools

#endif  // CONDUIT_TOOLS_CLI_SIZE_ARG_H_
