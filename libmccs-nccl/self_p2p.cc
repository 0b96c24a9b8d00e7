#include "self_p2p.h"

#include <algorithm>
#include <cstring>

namespace conduit {
namespace {

bool ToSelf(const PendingOp& op, int rank, uint8_t kind) {
  return op.desc.kind == kind && op.desc.peer == rank && op.place == MemoryKind::kHost;
}

}  // namespace

std::vector<SelfCopy> TakeSelfCopies(int rank, std::vector<PendingOp*>* list) {
  std::vector<const PendingOp*> sends, recvs;
  for (const PendingOp* op : *list) {
    if (ToSelf(*op, rank, shimproto::kSend)) sends.push_back(op);
    if (ToSelf(*op, rank, shimproto::kRecv)) recvs.push_back(op);
  }
  if (sends.empty() || sends.size() != recvs.size()) return {};
  std::vector<SelfCopy> copies;
  for (size_t k = 0; k < sends.size(); ++k) {
    if (sends[k]->in_bytes != recvs[k]->out_bytes) return {};
    copies.push_back({sends[k]->in, recvs[k]->out, sends[k]->in_bytes});
  }
  list->erase(std::remove_if(list->begin(), list->end(),
                             [rank](const PendingOp* op) {
                               return ToSelf(*op, rank, shimproto::kSend) || ToSelf(*op, rank, shimproto::kRecv);
                             }),
              list->end());
  return copies;
}

void RunSelfCopies(const std::vector<SelfCopy>& copies) {
  for (const SelfCopy& c : copies) memmove(c.to, c.from, c.bytes);
}

}  // namespace conduit
