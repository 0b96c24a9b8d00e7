// TempDir: a directory of one test's own under the system's temporary directory, removed
// (with what the test wrote there) when the TempDir goes.
#ifndef CONDUIT_TESTS_UNIT_TEMP_DIR_H_
#define CONDUIT_TESTS_UNIT_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace conduit::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `text` to the file `name` in the directory (replacing it); returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    return file;
  }

 private:
  std::string path_;
};

}  // namespace conduit::test

#endif  // CONDUIT_TESTS_UNIT_TEMP_DIR_H_
