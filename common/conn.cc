#include "common/conn.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "protocol/auth_protocol.h"

namespace conduit {
namespace {

using authproto::kMaxRecordPlaintext;
using authproto::kRecordHeaderBytes;

// Records are gathered into writes of about this size.
constexpr size_t kWriteBatchBytes = 256 << 10;

uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

Conn::Conn(UniqueFd fd, std::unique_ptr<RecordSealer> sealer, std::unique_ptr<RecordOpener> opener)
    : fd_(std::move(fd)), sealer_(std::move(sealer)), opener_(std::move(opener)) {
  cipher_.resize(kRecordHeaderBytes + kMaxRecordPlaintext + opener_->tag_bytes());
}

UniqueFd Conn::ReleaseFd() { return sealed() ? UniqueFd() : std::move(fd_); }

Status Conn::Reseal(std::unique_ptr<RecordSealer> sealer, std::unique_ptr<RecordOpener> opener) {
  if (sealer == nullptr || opener == nullptr) return InternalError("resealing without keys");
  if (buffered() > 0 || cipher_len_ > 0) return InternalError("resealing a connection with bytes unread");
  sealer_ = std::move(sealer);
  opener_ = std::move(opener);
  cipher_.resize(kRecordHeaderBytes + kMaxRecordPlaintext + opener_->tag_bytes());
  plain_.clear();
  plain_pos_ = 0;
  return Status::Ok();
}

void Conn::Export(Handed* out) const {
  *out = Handed{};
  if (!sealed()) return;
  out->sealer = sealer_->Export();
  out->opener = opener_->Export();
  out->opened.assign(reinterpret_cast<const char*>(plain_.data()) + plain_pos_, plain_.size() - plain_pos_);
  out->unopened.assign(reinterpret_cast<const char*>(cipher_.data()), cipher_len_);
}

bool Conn::Prime(const std::string& opened, const std::string& unopened) {
  if (!sealed()) return opened.empty() && unopened.empty();
  if (unopened.size() > cipher_.size() || opened.size() > kMaxRecordPlaintext * 64) return false;
  plain_.assign(opened.begin(), opened.end());
  plain_pos_ = 0;
  memcpy(cipher_.data(), unopened.data(), unopened.size());
  cipher_len_ = unopened.size();
  return true;
}

void Conn::Shutdown() {
  if (fd_.valid()) shutdown(fd_.get(), SHUT_RDWR);
}

Status Conn::OpenNextRecord(bool blocking, bool* would_block, bool* closed) {
  *would_block = false;
  *closed = false;
  const size_t tag = opener_->tag_bytes();
  for (;;) {
    if (cipher_len_ >= kRecordHeaderBytes) {
      const uint32_t len = LoadU32(cipher_.data());
      // A length outside what a sealer ever writes is corruption or an attack: refuse before
      // waiting for (or buffering) any of it.
      if (len <= tag || len > kMaxRecordPlaintext + tag) {
        return RemoteError("sealed record of %u bytes from the peer daemon is malformed", len);
      }
      const size_t whole = kRecordHeaderBytes + len;
      if (cipher_len_ >= whole) {
        if (plain_pos_ == plain_.size()) {
          plain_.clear();
          plain_pos_ = 0;
        }
        const size_t at = plain_.size();
        plain_.resize(at + len - tag);
        CONDUIT_RETURN_IF_ERROR(
            opener_->Open(cipher_.data(), kRecordHeaderBytes, cipher_.data() + kRecordHeaderBytes, len, plain_.data() + at));
        memmove(cipher_.data(), cipher_.data() + whole, cipher_len_ - whole);
        cipher_len_ -= whole;
        return Status::Ok();
      }
    }
    ssize_t r = recv(fd_.get(), cipher_.data() + cipher_len_, cipher_.size() - cipher_len_, blocking ? 0 : MSG_DONTWAIT);
    if (r > 0) {
      cipher_len_ += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      if (cipher_len_ > 0) return RemoteError("the peer daemon closed the connection in the middle of a sealed record");
      *closed = true;
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *would_block = true;
      return Status::Ok();
    }
    return SystemError("receive failed: %s", strerror(errno));
  }
}

Status Conn::ReadNow(void* dst, size_t n, size_t* got, bool blocking, bool* would_block) {
  *got = 0;
  *would_block = false;
  if (!sealed()) {
    for (;;) {
      ssize_t r = recv(fd_.get(), dst, n, blocking ? 0 : MSG_DONTWAIT);
      if (r >= 0) {
        *got = static_cast<size_t>(r);
        return Status::Ok();
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        *would_block = true;
        return Status::Ok();
      }
      return SystemError("receive failed: %s", strerror(errno));
    }
  }
  if (buffered() == 0) {
    bool closed = false;
    CONDUIT_RETURN_IF_ERROR(OpenNextRecord(blocking, would_block, &closed));
    if (*would_block || closed) return Status::Ok();
  }
  *got = std::min(n, buffered());
  memcpy(dst, plain_.data() + plain_pos_, *got);
  plain_pos_ += *got;
  return Status::Ok();
}

Status Conn::ReadFull(void* dst, size_t n, Deadline deadline) {
  if (!sealed()) return conduit::ReadFull(fd_.get(), dst, n, deadline);
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    size_t got = 0;
    bool would_block = false;
    CONDUIT_RETURN_IF_ERROR(ReadNow(out + done, n - done, &got, /*blocking=*/false, &would_block));
    if (would_block) {
      CONDUIT_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, deadline, "receive"));
      continue;
    }
    if (got == 0) return ClosedAfter(done, n);
    done += got;
  }
  return Status::Ok();
}

Status Conn::Peek(void* dst, size_t n, Deadline deadline) {
  if (!sealed()) {
    for (;;) {
      ssize_t r = recv(fd_.get(), dst, n, MSG_PEEK | MSG_DONTWAIT);
      if (r == static_cast<ssize_t>(n)) return Status::Ok();
      if (r == 0) return ClosedAfter(0, n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return SystemError("receive failed: %s", strerror(errno));
      if (deadline.expired()) return SystemError("timed out waiting for %zu bytes", n);
      if (r > 0) {
        // Part of it: poll would report readable at once, so wait for the rest here.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      CONDUIT_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, deadline, "receive"));
    }
  }
  while (buffered() < n) {
    bool would_block = false, closed = false;
    CONDUIT_RETURN_IF_ERROR(OpenNextRecord(/*blocking=*/false, &would_block, &closed));
    if (closed) return ClosedAfter(buffered(), n);
    if (would_block) CONDUIT_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, deadline, "receive"));
  }
  memcpy(dst, plain_.data() + plain_pos_, n);
  return Status::Ok();
}

Status Conn::Write(const void* data, size_t len, Deadline deadline) {
  iovec iov{const_cast<void*>(data), len};
  return WriteV(&iov, 1, deadline);
}

Status Conn::WriteV(const iovec* iov, int n, Deadline deadline) {
  if (!sealed()) return WriteFullV(fd_.get(), iov, n, deadline);
  const size_t tag = sealer_->tag_bytes();
  int i = 0;
  size_t off = 0;  // into iov[i]
  out_.clear();
  for (;;) {
    // Gather up to one record's worth of plaintext from the iovecs.
    iovec pieces[16];
    int npieces = 0;
    size_t plain = 0;
    while (i < n && npieces < 16 && plain < kMaxRecordPlaintext) {
      size_t left = iov[i].iov_len - off;
      if (left == 0) {
        ++i;
        off = 0;
        continue;
      }
      size_t take = std::min(left, kMaxRecordPlaintext - plain);
      pieces[npieces++] = {static_cast<uint8_t*>(iov[i].iov_base) + off, take};
      plain += take;
      off += take;
    }
    if (plain > 0) {
      const uint32_t len = static_cast<uint32_t>(plain + tag);
      const size_t at = out_.size();
      out_.resize(at + kRecordHeaderBytes + len);
      memcpy(out_.data() + at, &len, sizeof(len));
      CONDUIT_RETURN_IF_ERROR(sealer_->Seal(out_.data() + at, kRecordHeaderBytes, pieces, npieces,
                                            out_.data() + at + kRecordHeaderBytes));
    }
    const bool done = i >= n;
    if (!out_.empty() && (done || out_.size() >= kWriteBatchBytes)) {
      CONDUIT_RETURN_IF_ERROR(WriteFull(fd_.get(), out_.data(), out_.size(), deadline));
      out_.clear();
    }
    if (done) return Status::Ok();
  }
}

}  // namespace conduit
