#include "transport/local_link.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "transport/tcp.h"

namespace conduit {

Status NewLocalLinkPair(const std::string& a_name, const std::string& b_name, std::unique_ptr<Link>* a,
                        std::unique_ptr<Link>* b) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return SystemError("socketpair: %s", strerror(errno));
  }
  // Each end is named for the host at its far side, as a TcpLink's peer name is.
  *a = std::make_unique<TcpLink>(UniqueFd(fds[0]), b_name);
  *b = std::make_unique<TcpLink>(UniqueFd(fds[1]), a_name);
  return Status::Ok();
}

Status LocalMesh::Create(int nhosts, std::unique_ptr<LocalMesh>* out) {
  if (nhosts < 1) return InvalidArgument("a mesh needs at least one host, not %d", nhosts);
  auto mesh = std::unique_ptr<LocalMesh>(new LocalMesh);
  mesh->links_.resize(nhosts);
  for (auto& row : mesh->links_) row.resize(nhosts);
  for (int i = 0; i < nhosts; ++i) {
    for (int j = i + 1; j < nhosts; ++j) {
      CONDUIT_RETURN_IF_ERROR(NewLocalLinkPair("host" + std::to_string(i), "host" + std::to_string(j),
                                               &mesh->links_[i][j], &mesh->links_[j][i]));
    }
  }
  *out = std::move(mesh);
  return Status::Ok();
}

std::vector<Link*> LocalMesh::Row(int host) const {
  std::vector<Link*> row;
  for (const auto& link : links_[host]) row.push_back(link.get());
  return row;
}

}  // namespace conduit
