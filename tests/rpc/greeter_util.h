// Helpers shared by the greeter test programs.
#ifndef CONDUIT_TESTS_RPC_GREETER_UTIL_H_
#define CONDUIT_TESTS_RPC_GREETER_UTIL_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace conduit::test {

// Deterministic bytes, so each side can check what the other sent.
inline std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

// FNV-1a; pass the previous sum to continue over several messages.
inline uint64_t Checksum(const std::string& s, uint64_t sum = 1469598103934665603ull) {
  for (unsigned char c : s) sum = (sum ^ c) * 1099511628211ull;
  return sum;
}

// A whole file ("" when it cannot be read): PEM texts for the TLS options.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace conduit::test

#endif  // CONDUIT_TESTS_RPC_GREETER_UTIL_H_
