#include "security/aead_record_cipher.h"

#include <openssl/evp.h>

#include <string.h>

#include <climits>

namespace conduit {
namespace {

constexpr size_t kTagBytes = 16;

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CtxPtr = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

// The cipher context keeps the expanded key; each record only sets its nonce.
class GcmDirection {
 public:
  Status Init(const DirectionKeys& keys, bool encrypt) {
    ctx_.reset(EVP_CIPHER_CTX_new());
    keys_ = keys;
    salt_ = keys.salt;
    encrypt_ = encrypt;
    if (ctx_ == nullptr || EVP_CipherInit_ex(ctx_.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr, encrypt) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_GCM_SET_IVLEN, 12, nullptr) != 1 ||
        EVP_CipherInit_ex(ctx_.get(), nullptr, nullptr, keys.key.data(), nullptr, encrypt) != 1) {
      return InternalError("cannot set up AES-256-GCM");
    }
    return Status::Ok();
  }

  // Starts the next record: its nonce and its additional authenticated data.
  bool Begin(const uint8_t* aad, size_t aad_len) {
    std::array<uint8_t, 12> nonce = salt_;
    for (int i = 0; i < 8; ++i) nonce[11 - i] ^= static_cast<uint8_t>(seq_ >> (8 * i));
    ++seq_;
    int len = 0;
    return EVP_CipherInit_ex(ctx_.get(), nullptr, nullptr, nullptr, nonce.data(), encrypt_) == 1 &&
           EVP_CipherUpdate(ctx_.get(), nullptr, &len, aad, static_cast<int>(aad_len)) == 1;
  }
  bool Update(const uint8_t* in, size_t n, uint8_t* out) {
    while (n > 0) {
      int chunk = static_cast<int>(n > INT_MAX / 2 ? INT_MAX / 2 : n);
      int len = 0;
      if (EVP_CipherUpdate(ctx_.get(), out, &len, in, chunk) != 1 || len != chunk) return false;
      in += chunk;
      out += chunk;
      n -= static_cast<size_t>(chunk);
    }
    return true;
  }
  EVP_CIPHER_CTX* ctx() { return ctx_.get(); }
  // key, salt, then the next record's number (little-endian).
  std::string Export() const {
    std::string out(reinterpret_cast<const char*>(keys_.key.data()), keys_.key.size());
    out.append(reinterpret_cast<const char*>(keys_.salt.data()), keys_.salt.size());
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(seq_ >> (8 * i)));
    return out;
  }
  void SetNext(uint64_t seq) { seq_ = seq; }

 private:
  DirectionKeys keys_;
  CtxPtr ctx_;
  std::array<uint8_t, 12> salt_{};
  uint64_t seq_ = 0;
  bool encrypt_ = true;
};

class AesGcmSealer : public RecordSealer {
 public:
  Status Init(const DirectionKeys& keys, uint64_t next = 0) {
    CONDUIT_RETURN_IF_ERROR(dir_.Init(keys, /*encrypt=*/true));
    dir_.SetNext(next);
    return Status::Ok();
  }
  size_t tag_bytes() const override { return kTagBytes; }
  std::string Export() const override { return dir_.Export(); }
  Status Seal(const uint8_t* aad, size_t aad_len, const iovec* pieces, int n, uint8_t* out) override {
    bool ok = dir_.Begin(aad, aad_len);
    for (int i = 0; ok && i < n; ++i) {
      ok = dir_.Update(static_cast<const uint8_t*>(pieces[i].iov_base), pieces[i].iov_len, out);
      out += pieces[i].iov_len;
    }
    int len = 0;
    ok = ok && EVP_EncryptFinal_ex(dir_.ctx(), out, &len) == 1 && len == 0 &&
         EVP_CIPHER_CTX_ctrl(dir_.ctx(), EVP_CTRL_GCM_GET_TAG, kTagBytes, out) == 1;
    return ok ? Status::Ok() : InternalError("AES-256-GCM failed to seal a record");
  }

 private:
  GcmDirection dir_;
};

class AesGcmOpener : public RecordOpener {
 public:
  Status Init(const DirectionKeys& keys, uint64_t next = 0) {
    CONDUIT_RETURN_IF_ERROR(dir_.Init(keys, /*encrypt=*/false));
    dir_.SetNext(next);
    return Status::Ok();
  }
  size_t tag_bytes() const override { return kTagBytes; }
  std::string Export() const override { return dir_.Export(); }
  Status Open(const uint8_t* aad, size_t aad_len, const uint8_t* record, size_t len, uint8_t* plain) override {
    if (len < kTagBytes) return RemoteError("sealed record shorter than its tag");
    const size_t body = len - kTagBytes;
    int out_len = 0;
    bool ok = dir_.Begin(aad, aad_len) && dir_.Update(record, body, plain) &&
              EVP_CIPHER_CTX_ctrl(dir_.ctx(), EVP_CTRL_GCM_SET_TAG, kTagBytes,
                                  const_cast<uint8_t*>(record + body)) == 1 &&
              EVP_DecryptFinal_ex(dir_.ctx(), plain + body, &out_len) == 1;
    if (!ok) {
      return RemoteError("a sealed record from the peer daemon failed authentication (altered, replayed or "
                         "reordered on the way); closing the connection");
    }
    return Status::Ok();
  }

 private:
  GcmDirection dir_;
};

// A direction's state as GcmDirection::Export wrote it, made a sealer or opener (T) again.
template <typename T, typename Base>
Status ImportDirection(const std::string& state, std::unique_ptr<Base>* out) {
  DirectionKeys keys;
  if (state.size() != keys.key.size() + keys.salt.size() + 8) {
    return InvalidArgument("a handed-over record cipher state of %zu bytes", state.size());
  }
  memcpy(keys.key.data(), state.data(), keys.key.size());
  memcpy(keys.salt.data(), state.data() + keys.key.size(), keys.salt.size());
  uint64_t next = 0;
  for (int i = 0; i < 8; ++i) {
    next |= static_cast<uint64_t>(static_cast<uint8_t>(state[keys.key.size() + keys.salt.size() + i])) << (8 * i);
  }
  auto made = std::make_unique<T>();
  CONDUIT_RETURN_IF_ERROR(made->Init(keys, next));
  *out = std::move(made);
  return Status::Ok();
}

}  // namespace

Status ImportAesGcmSealer(const std::string& state, std::unique_ptr<RecordSealer>* out) {
  return ImportDirection<AesGcmSealer>(state, out);
}

Status ImportAesGcmOpener(const std::string& state, std::unique_ptr<RecordOpener>* out) {
  return ImportDirection<AesGcmOpener>(state, out);
}

Status NewAesGcmSealer(const DirectionKeys& keys, std::unique_ptr<RecordSealer>* out) {
  auto s = std::make_unique<AesGcmSealer>();
  CONDUIT_RETURN_IF_ERROR(s->Init(keys));
  *out = std::move(s);
  return Status::Ok();
}

Status NewAesGcmOpener(const DirectionKeys& keys, std::unique_ptr<RecordOpener>* out) {
  auto o = std::make_unique<AesGcmOpener>();
  CONDUIT_RETURN_IF_ERROR(o->Init(keys));
  *out = std::move(o);
  return Status::Ok();
}

}  // namespace conduit
