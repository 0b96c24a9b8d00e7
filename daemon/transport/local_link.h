// Links between threads of one process, for running the collective algorithms with N
// ranks in a unit test: no root, no network namespaces, no daemons.
//
// Each pair is an AF_UNIX stream socketpair driven by TcpLink, so the algorithms take the
// same transfer code (non-blocking sends and receives, flow limits, progress callbacks,
// deadlines) as between daemons; only the kernel's path under the socket differs.
#ifndef CONDUIT_DAEMON_TRANSPORT_LOCAL_LINK_H_
#define CONDUIT_DAEMON_TRANSPORT_LOCAL_LINK_H_

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/link.h"

namespace conduit {

// Two connected links: bytes sent on *a arrive on *b and back.
Status NewLocalLinkPair(const std::string& a_name, const std::string& b_name, std::unique_ptr<Link>* a,
                        std::unique_ptr<Link>* b);

// A full mesh of `nhosts` hosts: links[i][j] is host i's link to host j (null on the
// diagonal), so host i's HostGroup::links is the raw pointers of row i.
class LocalMesh {
 public:
  static Status Create(int nhosts, std::unique_ptr<LocalMesh>* out);

  int nhosts() const { return static_cast<int>(links_.size()); }
  std::vector<Link*> Row(int host) const;
  Link& At(int from, int to) const { return *links_[from][to]; }

 private:
  std::vector<std::vector<std::unique_ptr<Link>>> links_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TRANSPORT_LOCAL_LINK_H_
