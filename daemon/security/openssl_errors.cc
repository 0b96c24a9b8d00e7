#include "security/openssl_errors.h"

#include <openssl/err.h>

namespace conduit {
namespace {

// At most this many OpenSSL errors go into a message.
constexpr int kMaxErrorsShown = 4;

}  // namespace

std::string DrainOpenSslErrors(std::vector<unsigned long>* codes) {
  std::string text;
  int shown = 0;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    if (codes != nullptr) codes->push_back(e);
    if (shown++ >= kMaxErrorsShown) continue;
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text.empty() ? "no OpenSSL error" : text;
}

}  // namespace conduit
