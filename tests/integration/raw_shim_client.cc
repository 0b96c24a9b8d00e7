#include "raw_shim_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace conduit::it {

using namespace shimproto;

RawShimClient::~RawShimClient() {
  if (fd_ >= 0) ::close(fd_);
  if (memfd_ >= 0) ::close(memfd_);
}

bool RawShimClient::Connect(const std::string& path) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

bool RawShimClient::SendBytes(const void* data, size_t len) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    // MSG_NOSIGNAL: a daemon that already hung up must not SIGPIPE the test.
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool RawShimClient::SendFrame(uint16_t type, const void* payload, uint32_t len, int64_t announced_len, uint32_t magic,
                              uint16_t version, int pass_fd) {
  FrameHeader h{magic, version, type, announced_len < 0 ? len : static_cast<uint32_t>(announced_len), tag_++};
  std::vector<char> bytes(sizeof h + len);
  std::memcpy(bytes.data(), &h, sizeof h);
  if (len > 0) std::memcpy(bytes.data() + sizeof h, payload, len);
  if (pass_fd < 0) return SendBytes(bytes.data(), bytes.size());
  // The descriptor rides on the first byte; the rest follows as plain stream data.
  iovec iov{bytes.data(), 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
  if (::sendmsg(fd_, &msg, MSG_NOSIGNAL) != 1) return false;
  return SendBytes(bytes.data() + 1, bytes.size() - 1);
}

void RawShimClient::ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

bool RawShimClient::ReadExact(void* dst, size_t len, std::chrono::steady_clock::time_point deadline, Reply* why) {
  auto* p = static_cast<char*>(dst);
  while (len > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *why = Reply::kTimeout;
      return false;
    }
    pollfd pfd{fd_, POLLIN, 0};
    int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;  // re-check the deadline
    ssize_t n = ::recv(fd_, p, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = Reply::kClosed;
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

RawShimClient::Reply RawShimClient::Read(std::chrono::milliseconds timeout, FrameHeader* header,
                                         std::vector<uint8_t>* payload) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  Reply why = Reply::kFrame;
  if (!ReadExact(header, sizeof *header, deadline, &why)) return why;
  if (header->magic != kMagic || header->length > kMaxPayload) return Reply::kBadFrame;
  payload->resize(header->length);
  if (!ReadExact(payload->data(), payload->size(), deadline, &why)) return why;
  return Reply::kFrame;
}

int RawShimClient::ReadStatus(std::chrono::milliseconds timeout, std::vector<uint8_t>* payload) {
  FrameHeader h{};
  std::vector<uint8_t> body;
  switch (Read(timeout, &h, &body)) {
    case Reply::kClosed:
      return -1;
    case Reply::kTimeout:
      return -2;
    case Reply::kBadFrame:
      return -3;
    case Reply::kFrame:
      break;
  }
  if (body.size() < sizeof(WireStatus)) return -3;
  WireStatus st;
  std::memcpy(&st, body.data(), sizeof st);
  last_message_ = FromCString(st.message);
  if (payload != nullptr) *payload = std::move(body);
  return st.result;
}

std::string RawShimClient::OpenSession(size_t shm_size, std::chrono::milliseconds timeout, const char* join_id) {
  HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.version = kVersion;
  CopyCString(hello.exe, "malformed_test");
  std::vector<uint8_t> body;
  if (!SendFrame(kHello, &hello, sizeof hello)) return "cannot send Hello";
  if (int st = ReadStatus(timeout, &body); st != 0)
    return "Hello answered " + std::to_string(st) + ": " + last_message_;
  HelloReply hr;
  std::memcpy(&hr, body.data(), std::min(sizeof hr, body.size()));
  if (hr.accepted == 0) return "Hello refused: " + FromCString(hr.status.message);

  if (!SendFrame(kGetUniqueId, nullptr, 0)) return "cannot send GetUniqueId";
  if (int st = ReadStatus(timeout, &body); st != 0)
    return "GetUniqueId answered " + std::to_string(st) + ": " + last_message_;
  UniqueIdReply ur;
  std::memcpy(&ur, body.data(), std::min(sizeof ur, body.size()));

  std::memcpy(comm_id_, join_id != nullptr ? join_id : ur.id, sizeof comm_id_);
  CommInitRequest init{};
  std::memcpy(init.id, comm_id_, sizeof init.id);
  init.nranks = 1;
  init.rank = 0;
  if (!SendFrame(kCommInit, &init, sizeof init)) return "cannot send CommInit";
  if (int st = ReadStatus(timeout, &body); st != 0)
    return "CommInit answered " + std::to_string(st) + ": " + last_message_;

  // The daemon maps only segments sealed against shrinking (a shrink would SIGBUS it).
  memfd_ = ::memfd_create("malformed_test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd_ < 0 || ::ftruncate(memfd_, static_cast<off_t>(shm_size)) != 0 ||
      ::fcntl(memfd_, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
    return "memfd failed";
  AttachShmRequest attach{shm_size};
  if (!SendFrame(kAttachShm, &attach, sizeof attach, -1, kMagic, kVersion, memfd_)) return "cannot send AttachShm";
  if (int st = ReadStatus(timeout, &body); st != 0)
    return "AttachShm answered " + std::to_string(st) + ": " + last_message_;
  return "";
}

}  // namespace conduit::it
