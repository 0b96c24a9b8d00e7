// AdminClient: one HTTP request to conduitd's admin socket and its parsed answer.
#ifndef CONDUIT_TOOLS_CONDUITCTL_ADMIN_CLIENT_H_
#define CONDUIT_TOOLS_CONDUITCTL_ADMIN_CLIENT_H_

#include <string>

#include "admin/http.h"
#include "common/status.h"

namespace conduit {

class AdminClient {
 public:
  AdminClient(std::string socket_path, int timeout_ms) : socket_path_(std::move(socket_path)), timeout_ms_(timeout_ms) {}

  // Connects, sends `method target` with `body`, reads the whole response. A non-2xx HTTP
  // status is not an error here: the caller reads response->status.
  Status Call(const std::string& method, const std::string& target, const std::string& body,
              HttpResponse* response) const;
  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  int timeout_ms_;
};

}  // namespace conduit

#endif  // CONDUIT_TOOLS_CONDUITCTL_ADMIN_CLIENT_H_
