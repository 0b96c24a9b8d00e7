// This thread's OpenSSL error queue as text, for the one log line or status a failure gets.
#ifndef CONDUIT_DAEMON_SECURITY_OPENSSL_ERRORS_H_
#define CONDUIT_DAEMON_SECURITY_OPENSSL_ERRORS_H_

#include <string>
#include <vector>

namespace conduit {

// Empties this thread's OpenSSL error queue into one line: its first few errors, "; "
// apart (the first ones say what happened), or "no OpenSSL error". Every code drained goes
// into *codes when given. Draining all of it keeps an old error from being blamed on the
// next failure of this thread.
std::string DrainOpenSslErrors(std::vector<unsigned long>* codes = nullptr);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_OPENSSL_ERRORS_H_
