#include "rpc/message.h"

#include <utility>

namespace conduit::rpc {

Message Message::Shared(const uint8_t* data, size_t len, std::function<void()> release) {
  Message m;
  m.kind_ = Kind::kShared;
  m.data_ = data;
  m.size_ = len;
  m.release_ = std::move(release);
  return m;
}

Message Message::Owned(std::string bytes) {
  Message m;
  m.kind_ = Kind::kOwned;
  m.owned_ = std::move(bytes);
  m.data_ = reinterpret_cast<const uint8_t*>(m.owned_.data());
  m.size_ = m.owned_.size();
  return m;
}

Message Message::Received(uint8_t* data, size_t len, const void* owner, uint32_t segment, uint64_t offset,
                          std::function<void()> release) {
  Message m;
  m.kind_ = Kind::kReceived;
  m.data_ = data;
  m.size_ = len;
  m.owner_ = owner;
  m.segment_ = segment;
  m.offset_ = offset;
  m.release_ = std::move(release);
  return m;
}

Message::Message(Message&& other) noexcept { *this = std::move(other); }

Message& Message::operator=(Message&& other) noexcept {
  if (this == &other) return *this;
  Release();
  kind_ = other.kind_;
  owned_ = std::move(other.owned_);
  data_ = kind_ == Kind::kOwned ? reinterpret_cast<const uint8_t*>(owned_.data()) : other.data_;
  size_ = other.size_;
  owner_ = other.owner_;
  segment_ = other.segment_;
  offset_ = other.offset_;
  release_ = std::move(other.release_);
  other.kind_ = Kind::kNone;
  other.data_ = nullptr;
  other.size_ = 0;
  other.release_ = nullptr;
  return *this;
}

void Message::MakePrivate() {
  if (kind_ != Kind::kShared) return;
  std::string copy(reinterpret_cast<const char*>(data_), size_);
  *this = Owned(std::move(copy));
}

void Message::Release() {
  if (release_) {
    auto release = std::move(release_);
    release_ = nullptr;
    release();
  }
  kind_ = Kind::kNone;
  data_ = nullptr;
  size_ = 0;
  owned_.clear();
}

}  // namespace conduit::rpc
