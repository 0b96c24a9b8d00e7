#include "common/env_bytes.h"

#include <cstdlib>

namespace conduit {

size_t EnvBytes(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return end != v && *end == '\0' ? static_cast<size_t>(n) : fallback;
}

}  // namespace conduit
