// Conn: one connection to another daemon, after the peer handshake (security/peer_security.h),
// as every service reads and writes it. When the handshake sealed the connection, its bytes
// travel in authenticated, encrypted records (protocol/auth_protocol.h) and Conn seals and
// opens them, so sealing is invisible to the protocols above. Unsealed, every call goes
// straight to the socket (common/fd_io.h): no buffer, no copy, no cost.
//
// One thread may read while another writes; concurrent readers (or writers) must serialize
// among themselves, as they must on a plain socket. Deadlines bound every wait.
#ifndef CONDUIT_DAEMON_COMMON_CONN_H_
#define CONDUIT_DAEMON_COMMON_CONN_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/record_cipher.h"
#include "common/status.h"

namespace conduit {

class Conn {
 public:
  Conn() = default;
  explicit Conn(UniqueFd fd) : fd_(std::move(fd)) {}
  Conn(UniqueFd fd, std::unique_ptr<RecordSealer> sealer, std::unique_ptr<RecordOpener> opener);
  Conn(Conn&&) noexcept = default;
  Conn& operator=(Conn&&) noexcept = default;

  int fd() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  bool sealed() const { return sealer_ != nullptr; }
  // The socket itself, for code that speaks to it directly (collective links, which are
  // never sealed). Must not be called on a sealed connection.
  UniqueFd ReleaseFd();

  Status ReadFull(void* dst, size_t n, Deadline deadline);
  // One read of what is available: *got >= 1, or *got == 0 at a clean end of the stream
  // (between records). With blocking false it never waits and sets *would_block instead;
  // with blocking true it waits in the receive itself (the socket must be blocking).
  Status ReadNow(void* dst, size_t n, size_t* got, bool blocking, bool* would_block);
  // Waits until `n` bytes can be read and copies them without consuming them.
  Status Peek(void* dst, size_t n, Deadline deadline);
  // Bytes already received and opened but not yet read (poll(2) on fd() cannot see them).
  size_t buffered() const { return plain_.size() - plain_pos_; }
  // Bytes received and not yet read, opened or not: a reader that waits in poll(2) for
  // its next read must not while there are any (whole records may wait here unopened).
  size_t received() const { return buffered() + cipher_len_; }

  Status WriteV(const iovec* iov, int n, Deadline deadline);
  Status Write(const void* data, size_t len, Deadline deadline);

  // Seals every later record with new keys (a TLS link's, rpc/tls_flights.h), sealed
  // before or not. Both ends switch at the same point of the stream, so nothing may be
  // received and unread here.
  Status Reseal(std::unique_ptr<RecordSealer> sealer, std::unique_ptr<RecordOpener> opener);

  // Makes pending and future reads and writes on both ends fail.
  void Shutdown();

  // A live upgrade hands the connection to a new process (docs/upgrade.md, "RPC calls in
  // flight"), between two reads and with nothing being written: the sealing state of each
  // direction (RecordSealer/RecordOpener::Export; empty when not sealed), the plaintext
  // opened and not yet read, and the ciphertext received and not yet opened.
  struct Handed {
    std::string sealer, opener, opened, unopened;
  };
  void Export(Handed* out) const;
  // In the new process, on a Conn made with the imported sealer and opener: the bytes the
  // old one had received. False when they cannot be what a Conn holds.
  bool Prime(const std::string& opened, const std::string& unopened);

 private:
  // Opens the next whole record into plain_ (appending); *would_block or *closed when none.
  Status OpenNextRecord(bool blocking, bool* would_block, bool* closed);

  UniqueFd fd_;
  std::unique_ptr<RecordSealer> sealer_;
  std::unique_ptr<RecordOpener> opener_;
  // Receive side (sealed only): ciphertext not yet opened, and plaintext not yet read.
  std::vector<uint8_t> cipher_;
  size_t cipher_len_ = 0;
  std::vector<uint8_t> plain_;
  size_t plain_pos_ = 0;
  // Send side (sealed only): records being built.
  std::vector<uint8_t> out_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_CONN_H_
