// Buffered frame I/O for connections that carry many small frames in both directions
// (the RPC service's program sockets and daemon links, and the gRPC shim's socket).
//
// FrameReader reads ahead into a buffer so a burst of frames costs one system call, and
// reads large payloads straight into their destination (a shared segment). FrameWriter
// queues frames from any thread; whichever thread finds the writer idle sends everything
// queued in one sendmsg, so an idle connection has no hand-off to a writer thread and a busy
// one batches. Frames queued as urgent go before bulk ones not yet started (small-RPC-first).
#ifndef CONDUIT_DAEMON_COMMON_FRAME_STREAM_H_
#define CONDUIT_DAEMON_COMMON_FRAME_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/conn.h"
#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/frame.h"
#include "common/status.h"

namespace conduit {

// With a deadline a read waits in poll(2); without one it blocks in the receive itself,
// which is cheaper, and needs a blocking socket (on a non-blocking one it falls back to
// poll).
class FrameReader {
 public:
  FrameReader(int fd, uint32_t magic, uint16_t version, uint32_t max_payload, bool accept_fds);
  // On a connection to another daemon, which may be sealed (its records are opened here).
  FrameReader(Conn* conn, uint32_t magic, uint16_t version, uint32_t max_payload);

  // Reads and checks the next frame header (magic, version, length). Its payload must be
  // consumed with Read before the next call. A clean close between frames sets closed().
  Status NextHeader(FrameHeader* header, Deadline deadline);
  // Like NextHeader, but waits for the header's first byte until `idle` and, once part of
  // it has arrived, for the rest at most `started_ms` more: a connection may idle between
  // frames, never in the middle of a header.
  Status NextHeader(FrameHeader* header, Deadline idle, int started_ms);
  // Like NextHeader, but never waits: *got is false when no whole header has arrived yet
  // (what did arrive stays buffered).
  Status TryNextHeader(FrameHeader* header, bool* got);
  // Reads the next n bytes of the current payload into dst.
  Status Read(void* dst, size_t n, Deadline deadline);
  Status ReadString(size_t n, std::string* out, Deadline deadline);
  // Descriptors that arrived (SCM_RIGHTS), oldest first; invalid when none.
  UniqueFd TakeFd();
  bool closed() const { return closed_; }
  // Bytes received and not yet consumed.
  size_t buffered() const { return end_ - begin_; }
  // After `conn` was resealed (Conn::Reseal): reads go through its new records.
  void Rebind(Conn* conn) { conn_ = conn->sealed() ? conn : nullptr; }
  // A live upgrade hands the connection to another process: the bytes received past the
  // last frame consumed, and duplicates of the descriptors not yet taken (the reader keeps
  // both, in case the upgrade is called off).
  std::string ReadAhead() const;
  Status DupFds(std::vector<UniqueFd>* out) const;
  // In that process, before the first read: bytes to read before the connection's, and
  // descriptors that came with them. False when they do not fit the read buffer.
  bool Prime(const std::string& bytes, std::vector<UniqueFd> fds);

 private:
  Status Fill(Deadline deadline);
  Status CheckHeader(FrameHeader* header);
  Status Receive(void* dst, size_t n, size_t* got, Deadline deadline);
  // One receive; *would_block when nothing was there (never with blocking).
  Status ReceiveNow(void* dst, size_t n, size_t* got, bool blocking, bool* would_block);

  int fd_;
  Conn* conn_ = nullptr;  // set when reading a sealed connection
  uint32_t magic_;
  uint16_t version_;
  uint32_t max_payload_;
  bool accept_fds_;
  bool closed_ = false;
  std::vector<uint8_t> buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
  std::deque<UniqueFd> fds_;
};

// One frame to send: `head` (frame header and fixed parts, owned), then `data_len` bytes at
// `data` (not owned: a shared segment the caller keeps alive until on_done), or `owned`.
struct OutFrame {
  std::string head;
  const void* data = nullptr;
  size_t data_len = 0;
  std::string owned;
  UniqueFd fd;                          // passed with SCM_RIGHTS (Unix sockets only)
  std::function<void(bool sent)> on_done;  // runs once, after sending or on failure
  bool urgent = true;                   // false: bulk, may be overtaken by urgent frames
};

// Builds a frame header into the front of f->head for a payload of `payload_len` bytes.
void PutFrameHeader(OutFrame* f, uint32_t magic, uint16_t version, uint16_t type, uint32_t tag, size_t payload_len);

class FrameWriter {
 public:
  FrameWriter(int fd, int timeout_ms);
  // On a connection to another daemon, which may be sealed (frames are sealed here).
  FrameWriter(Conn* conn, int timeout_ms);
  ~FrameWriter();

  // Queues a frame; never blocks. Fails (running on_done(false)) once the writer failed.
  bool Enqueue(OutFrame frame);
  // Sends what is queued unless another thread is already doing so.
  Status Flush();
  Status Send(OutFrame frame) {
    if (!Enqueue(std::move(frame))) return failure();
    return Flush();
  }
  // Makes the writer fail: queued frames are dropped (on_done(false)), later ones refused.
  void Fail(const Status& why);
  Status failure() const;
  size_t queued_bytes() const;
  // Nothing queued and no batch being written (queued_bytes() drops as a batch is taken,
  // before its write ends): the connection's send side is at rest, as a live upgrade's
  // handover of it needs.
  bool drained() const;
  // Adds to *counter every urgent frame sent while bulk frames waited in the queue (what
  // the priority bought). Set before the writer is used.
  void CountUrgentAheadOfBulk(std::atomic<uint64_t>* counter) { ahead_of_bulk_ = counter; }
  // After `conn` was resealed (Conn::Reseal), with nothing queued or being sent: writes go
  // through its new records.
  void Rebind(Conn* conn) { conn_ = conn->sealed() ? conn : nullptr; }

 private:
  Status WriteBatch(std::vector<OutFrame>& batch);

  int fd_;
  Conn* conn_ = nullptr;  // set when writing a sealed connection
  int timeout_ms_;
  mutable std::mutex mu_;
  std::deque<OutFrame> urgent_;
  std::deque<OutFrame> bulk_;
  size_t queued_bytes_ = 0;
  std::atomic<uint64_t>* ahead_of_bulk_ = nullptr;
  bool sending_ = false;
  Status failed_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_FRAME_STREAM_H_
