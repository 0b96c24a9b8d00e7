#include "common/exe_name.h"

#include <string.h>
#include <unistd.h>

namespace conduit {

std::string ExeName() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "unknown";
  path[n] = '\0';
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace conduit
