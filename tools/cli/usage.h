// Every Conduit tool answers -h or --help the same way: its usage text on stdout and exit
// status 0, before it looks at any other argument (a mistake prints the usage on stderr
// and exits 2, as each tool does itself).
#ifndef CONDUIT_TOOLS_CLI_USAGE_H_
#define CONDUIT_TOOLS_CLI_USAGE_H_

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conduit::tools {

inline void ExitWithUsageIfAsked(int argc, char** argv, const char* usage) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::fputs(usage, stdout);
      std::exit(0);
    }
  }
}

}  // namespace conduit::tools

#endif  // CONDUIT_TOOLS_CLI_USAGE_H_
