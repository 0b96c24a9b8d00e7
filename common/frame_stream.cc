#include "common/frame_stream.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace conduit {
namespace {

constexpr size_t kReadBuffer = 256 << 10;
constexpr size_t kBatchIov = 64;
constexpr size_t kBatchBytes = 1 << 20;
// Descriptors received and not yet taken by a frame that carries one (TakeFd). A peer that
// sends them with other frames, or with byte-sized pieces of one, would otherwise make the
// reader hold them without end, up to the process's descriptor limit, which every other
// connection then pays for. Far above what frames in flight carry (one each).
constexpr size_t kMaxHeldFds = 64;

}  // namespace

FrameReader::FrameReader(int fd, uint32_t magic, uint16_t version, uint32_t max_payload, bool accept_fds)
    : fd_(fd), magic_(magic), version_(version), max_payload_(max_payload), accept_fds_(accept_fds), buf_(kReadBuffer) {}

FrameReader::FrameReader(Conn* conn, uint32_t magic, uint16_t version, uint32_t max_payload)
    : FrameReader(conn->fd(), magic, version, max_payload, /*accept_fds=*/false) {
  if (conn->sealed()) conn_ = conn;
}

Status FrameReader::ReceiveNow(void* dst, size_t n, size_t* got, bool blocking, bool* would_block) {
  *would_block = false;
  if (conn_ != nullptr) return conn_->ReadNow(dst, n, got, blocking, would_block);
  for (;;) {
    iovec iov{dst, n};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (accept_fds_) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
    }
    ssize_t r = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC | (blocking ? 0 : MSG_DONTWAIT));
    if (r > 0) {
      if (accept_fds_ && msg.msg_controllen > 0) {
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
          if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
          size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          for (size_t i = 0; i < count; ++i) {
            int got_fd;
            memcpy(&got_fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            fds_.emplace_back(got_fd);  // owned (closed) from here, even when refused below
          }
        }
        if (fds_.size() > kMaxHeldFds) {
          fds_.clear();
          return InvalidUsage("more than %zu descriptors sent without frames that take them", kMaxHeldFds);
        }
      }
      *got = static_cast<size_t>(r);
      return Status::Ok();
    }
    *got = 0;
    if (r == 0) return Status::Ok();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *would_block = true;
      return Status::Ok();
    }
    return SystemError("receive failed: %s", strerror(errno));
  }
}

Status FrameReader::Receive(void* dst, size_t n, size_t* got, Deadline deadline) {
  for (;;) {
    bool would_block;
    // Waiting without a deadline, a blocking receive on a blocking socket is one system
    // call per wake-up instead of three (failed receive, poll, receive).
    CONDUIT_RETURN_IF_ERROR(ReceiveNow(dst, n, got, deadline.is_never(), &would_block));
    if (!would_block) return Status::Ok();
    CONDUIT_RETURN_IF_ERROR(WaitFd(fd_, POLLIN, deadline, "receive"));
  }
}

Status FrameReader::Fill(Deadline deadline) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (end_ == buf_.size()) {
    memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  size_t got = 0;
  CONDUIT_RETURN_IF_ERROR(Receive(buf_.data() + end_, buf_.size() - end_, &got, deadline));
  if (got == 0) return ClosedAfter(end_ - begin_, 0);
  end_ += got;
  return Status::Ok();
}

Status FrameReader::NextHeader(FrameHeader* header, Deadline deadline) {
  return NextHeader(header, deadline, /*started_ms=*/-1);
}

// started_ms < 0: `idle` bounds the whole header.
Status FrameReader::NextHeader(FrameHeader* header, Deadline idle, int started_ms) {
  closed_ = false;
  Deadline started = idle;
  bool began = false;
  while (end_ - begin_ < sizeof(FrameHeader)) {
    bool empty = end_ == begin_;
    if (!empty && !began && started_ms >= 0) {
      started = Deadline::AfterMs(started_ms);
      began = true;
    }
    Status st = Fill(empty ? idle : started);
    if (!st.ok()) {
      if (IsEndOfStream(st)) closed_ = true;
      return st;
    }
  }
  return CheckHeader(header);
}

Status FrameReader::TryNextHeader(FrameHeader* header, bool* got) {
  *got = false;
  closed_ = false;
  if (end_ - begin_ < sizeof(FrameHeader)) {
    if (begin_ == end_) begin_ = end_ = 0;
    if (end_ == buf_.size()) {
      memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    bool empty = begin_ == end_;
    size_t r = 0;
    bool would_block = false;
    CONDUIT_RETURN_IF_ERROR(ReceiveNow(buf_.data() + end_, buf_.size() - end_, &r, /*blocking=*/false, &would_block));
    if (would_block) return Status::Ok();
    if (r == 0) {
      closed_ = empty;
      return ClosedAfter(end_ - begin_, 0);
    }
    end_ += r;
    if (end_ - begin_ < sizeof(FrameHeader)) return Status::Ok();
  }
  *got = true;
  return CheckHeader(header);
}

Status FrameReader::CheckHeader(FrameHeader* header) {
  memcpy(header, buf_.data() + begin_, sizeof(FrameHeader));
  begin_ += sizeof(FrameHeader);
  if (header->magic != magic_) {
    return InvalidUsage("bad frame magic 0x%08x (expected 0x%08x): peer speaks another protocol", header->magic, magic_);
  }
  if (header->version != version_) {
    return InvalidUsage("unsupported protocol version %u (this side speaks %u)", header->version, version_);
  }
  if (header->length > max_payload_) {
    return InvalidUsage("frame of type 0x%04x announces %u payload bytes, limit is %u", header->type, header->length,
                        max_payload_);
  }
  return Status::Ok();
}

Status FrameReader::Read(void* dst, size_t n, Deadline deadline) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t have = std::min(n, end_ - begin_);
  if (have > 0) memcpy(out, buf_.data() + begin_, have);  // an empty payload may come with no buffer
  begin_ += have;
  out += have;
  n -= have;
  while (n > 0) {
    if (n >= buf_.size() / 2) {
      // Large payloads go straight to their destination.
      size_t got = 0;
      CONDUIT_RETURN_IF_ERROR(Receive(out, n, &got, deadline));
      if (got == 0) return SystemError("connection closed by peer in the middle of a frame");
      out += got;
      n -= got;
      continue;
    }
    Status st = Fill(deadline);
    if (!st.ok()) return SystemError("%s in the middle of a frame", st.message().c_str());
    size_t take = std::min(n, end_ - begin_);
    memcpy(out, buf_.data() + begin_, take);
    begin_ += take;
    out += take;
    n -= take;
  }
  return Status::Ok();
}

Status FrameReader::ReadString(size_t n, std::string* out, Deadline deadline) {
  out->resize(n);
  return Read(out->data(), n, deadline);
}

UniqueFd FrameReader::TakeFd() {
  if (fds_.empty()) return UniqueFd();
  UniqueFd fd = std::move(fds_.front());
  fds_.pop_front();
  return fd;
}

std::string FrameReader::ReadAhead() const {
  return std::string(reinterpret_cast<const char*>(buf_.data()) + begin_, end_ - begin_);
}

Status FrameReader::DupFds(std::vector<UniqueFd>* out) const {
  for (const UniqueFd& fd : fds_) {
    UniqueFd copy;
    CONDUIT_RETURN_IF_ERROR(DupFd(fd.get(), "a descriptor that arrived with a frame", &copy));
    out->push_back(std::move(copy));
  }
  return Status::Ok();
}

bool FrameReader::Prime(const std::string& bytes, std::vector<UniqueFd> fds) {
  if (bytes.size() > buf_.size() - (end_ - begin_) || begin_ != end_) return false;
  begin_ = 0;
  end_ = bytes.size();
  memcpy(buf_.data(), bytes.data(), bytes.size());
  for (UniqueFd& fd : fds) fds_.push_back(std::move(fd));
  return true;
}

void PutFrameHeader(OutFrame* f, uint32_t magic, uint16_t version, uint16_t type, uint32_t tag, size_t payload_len) {
  FrameHeader h{magic, version, type, static_cast<uint32_t>(payload_len), tag};
  f->head.insert(0, reinterpret_cast<const char*>(&h), sizeof(h));
}

FrameWriter::FrameWriter(int fd, int timeout_ms) : fd_(fd), timeout_ms_(timeout_ms) {}

FrameWriter::FrameWriter(Conn* conn, int timeout_ms) : FrameWriter(conn->fd(), timeout_ms) {
  if (conn->sealed()) conn_ = conn;
}

FrameWriter::~FrameWriter() { Fail(SystemError("connection closed")); }

bool FrameWriter::Enqueue(OutFrame frame) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) {
      queued_bytes_ += frame.head.size() + frame.data_len + frame.owned.size();
      (frame.urgent ? urgent_ : bulk_).push_back(std::move(frame));
      return true;
    }
  }
  if (frame.on_done) frame.on_done(false);
  return false;
}

Status FrameWriter::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

size_t FrameWriter::queued_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_;
}

bool FrameWriter::drained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_bytes_ == 0 && !sending_;
}

Status FrameWriter::WriteBatch(std::vector<OutFrame>& batch) {
  iovec iov[kBatchIov];
  int n = 0;
  int pass_fd = -1;
  for (auto& f : batch) {
    if (f.fd.valid()) pass_fd = f.fd.get();  // such a frame always travels alone
    iov[n++] = {f.head.data(), f.head.size()};
    if (f.data_len > 0) iov[n++] = {const_cast<void*>(f.data), f.data_len};
    if (!f.owned.empty()) iov[n++] = {f.owned.data(), f.owned.size()};
  }
  if (conn_ != nullptr) return conn_->WriteV(iov, n, Deadline::AfterMs(timeout_ms_));
  return WriteWithFd(fd_, iov, n, pass_fd, Deadline::AfterMs(timeout_ms_));
}

Status FrameWriter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (sending_) return Status::Ok();
  if (!failed_.ok()) return failed_;
  sending_ = true;
  Status st;
  while (!urgent_.empty() || !bulk_.empty()) {
    std::vector<OutFrame> batch;
    size_t iovs = 0, bytes = 0;
    auto take_from = [&](std::deque<OutFrame>& q) {
      while (!q.empty() && iovs + 3 <= kBatchIov && bytes < kBatchBytes) {
        OutFrame& f = q.front();
        if (f.fd.valid() && !batch.empty()) return;
        size_t len = f.head.size() + f.data_len + f.owned.size();
        bytes += len;
        queued_bytes_ -= len;
        iovs += 3;
        bool alone = f.fd.valid();
        batch.push_back(std::move(f));
        q.pop_front();
        if (alone) {
          iovs = kBatchIov;
          return;
        }
      }
    };
    bool bulk_waits = !bulk_.empty();
    take_from(urgent_);
    if (bulk_waits && ahead_of_bulk_ != nullptr) ahead_of_bulk_->fetch_add(batch.size(), std::memory_order_relaxed);
    take_from(bulk_);
    lock.unlock();
    st = WriteBatch(batch);
    for (auto& f : batch) {
      if (f.on_done) f.on_done(st.ok());
    }
    lock.lock();
    if (!st.ok()) break;
  }
  sending_ = false;
  if (!st.ok() && failed_.ok()) {
    lock.unlock();
    Fail(st);
  }
  return st;
}

void FrameWriter::Fail(const Status& why) {
  std::deque<OutFrame> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) failed_ = why.ok() ? SystemError("connection failed") : why;
    dropped.swap(urgent_);
    for (auto& f : bulk_) dropped.push_back(std::move(f));
    bulk_.clear();
    queued_bytes_ = 0;
  }
  for (auto& f : dropped) {
    if (f.on_done) f.on_done(false);
  }
}

}  // namespace conduit
