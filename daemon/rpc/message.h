// Message: the bytes of one RPC message as they cross the daemon, wherever they are.
//
//   Shared:   in the sending program's send segment; sent to TCP straight from there and
//             handed back (release ring) when done.
//   Owned:    in the daemon's private memory: inline bytes from a frame, a copy made for a
//             policy that reads the content (so the program cannot change them after the
//             check), or bytes read from a link for such a policy.
//   Received: already in the receiving program's receive segment, read there from TCP;
//             delivering it only names the block.
// Move-only; the destructor releases whatever the message still holds.
#ifndef CONDUIT_DAEMON_RPC_MESSAGE_H_
#define CONDUIT_DAEMON_RPC_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace conduit::rpc {

class Message {
 public:
  enum class Kind { kNone, kShared, kOwned, kReceived };

  Message() = default;
  static Message Shared(const uint8_t* data, size_t len, std::function<void()> release);
  static Message Owned(std::string bytes);
  static Message Received(uint8_t* data, size_t len, const void* owner, uint32_t segment, uint64_t offset,
                          std::function<void()> release);
  Message(Message&& other) noexcept;
  Message& operator=(Message&& other) noexcept;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  ~Message() { Release(); }

  Kind kind() const { return kind_; }
  bool empty() const { return kind_ == Kind::kNone; }
  const uint8_t* data() const { return data_; }
  // Owned and Received messages are filled in place as their bytes arrive from a link.
  uint8_t* mutable_data() { return const_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }
  // Received: whose receive segment, and where; the block then belongs to that program.
  const void* owner() const { return owner_; }
  uint32_t segment() const { return segment_; }
  uint64_t offset() const { return offset_; }
  // The program now owns the block (it will release it itself).
  void HandOver() { release_ = nullptr; }
  // Copies Shared bytes into private memory (before a policy reads them).
  void MakePrivate();
  void Release();

 private:
  Kind kind_ = Kind::kNone;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string owned_;
  const void* owner_ = nullptr;
  uint32_t segment_ = 0;
  uint64_t offset_ = 0;
  std::function<void()> release_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_MESSAGE_H_
