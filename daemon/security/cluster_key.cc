#include "security/cluster_key.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd_io.h"
#include "security/crypto.h"

namespace conduit {
namespace {

constexpr size_t kMaxKeyFileBytes = 4096;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void SetId(ClusterKey* key) {
  std::string data = "conduit cluster key id v1";
  data.append(reinterpret_cast<const char*>(key->bytes.data()), key->bytes.size());
  crypto::Digest d = crypto::Sha256(data);
  memcpy(key->fingerprint.data(), d.data(), key->fingerprint.size());
  key->id = crypto::Hex(key->fingerprint.data(), key->fingerprint.size());
}

Status ParseKeyText(const std::string& path, std::string text, ClusterKey* key) {
  size_t b = 0, e = text.size();
  while (b < e && IsSpace(text[b])) ++b;
  while (e > b && IsSpace(text[e - 1])) --e;
  if (e - b != 2 * key->bytes.size()) {
    return InvalidArgument("cluster key file %s must hold exactly %zu hex digits (a 256-bit key; make one with "
                           "`conduitctl keygen FILE`), found %zu characters",
                           path.c_str(), 2 * key->bytes.size(), e - b);
  }
  for (size_t i = 0; i < key->bytes.size(); ++i) {
    int hi = HexDigit(text[b + 2 * i]), lo = HexDigit(text[b + 2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument("cluster key file %s holds a character that is not a hex digit", path.c_str());
    key->bytes[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  // The text held the key: do not leave it in freed memory.
  crypto::Cleanse(text.data(), text.size());
  SetId(key);
  return Status::Ok();
}

}  // namespace

Status LoadClusterKey(const std::string& path, ClusterKey* key) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    return SystemError("cannot open cluster key file %s: %s%s", path.c_str(), strerror(errno),
                       errno == ELOOP ? " (a symbolic link; give the file itself)" : "");
  }
  struct stat st{};
  if (fstat(fd.get(), &st) != 0) return SystemError("cannot stat cluster key file %s: %s", path.c_str(), strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("cluster key file %s is not a regular file", path.c_str());
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return InvalidUsage("cluster key file %s is owned by uid %u; it must belong to root or to the daemon's user (uid %u)",
                        path.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    return InvalidUsage("cluster key file %s has mode %04o: other users could read it; run `chmod 600 %s`", path.c_str(),
                        static_cast<unsigned>(st.st_mode & 07777), path.c_str());
  }
  if (st.st_size > static_cast<off_t>(kMaxKeyFileBytes)) {
    return InvalidArgument("cluster key file %s is %lld bytes; a key is 64 hex digits", path.c_str(),
                           static_cast<long long>(st.st_size));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t r = read(fd.get(), text.data() + got, text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return SystemError("cannot read cluster key file %s: %s", path.c_str(), r < 0 ? strerror(errno) : "short read");
    got += static_cast<size_t>(r);
  }
  return ParseKeyText(path, std::move(text), key);
}

Status EphemeralClusterKey(ClusterKey* key) {
  CONDUIT_RETURN_IF_ERROR(crypto::RandomBytes(key->bytes.data(), key->bytes.size()));
  SetId(key);
  return Status::Ok();
}

Status NewClusterKeyText(std::string* text) {
  std::array<uint8_t, 32> bytes{};
  CONDUIT_RETURN_IF_ERROR(crypto::RandomBytes(bytes.data(), bytes.size()));
  *text = crypto::Hex(bytes.data(), bytes.size()) + "\n";
  return Status::Ok();
}

Status WriteNewClusterKeyFile(const std::string& path) {
  std::string text;
  CONDUIT_RETURN_IF_ERROR(NewClusterKeyText(&text));
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return SystemError("cannot create %s: %s", path.c_str(), strerror(errno));
  // The mode asked for at creation passes through the umask, which can only remove bits.
  if (fchmod(fd.get(), 0600) != 0) return SystemError("cannot chmod %s: %s", path.c_str(), strerror(errno));
  if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) || fsync(fd.get()) != 0) {
    return SystemError("cannot write %s: %s", path.c_str(), strerror(errno));
  }
  return Status::Ok();
}

}  // namespace conduit
