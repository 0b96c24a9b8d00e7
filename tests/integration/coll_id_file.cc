#include "coll_id_file.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

namespace conduit::it {

bool WriteIdFile(const std::string& path, const ncclUniqueId& id) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(id.internal, sizeof id.internal);
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool ReadIdFile(const std::string& path, int timeout_s, ncclUniqueId* id) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id->internal, sizeof id->internal) && in.gcount() == sizeof id->internal) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace conduit::it
