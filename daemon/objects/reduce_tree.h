// The shape of a Hoplite reduce tree and the choice of its degree.
//
// For n objects of S bytes on links of bandwidth B and per-hop latency L, a d-ary tree
// takes (seed 003, eq. 2.1)
//     T(1) = n L + S / B                (a chain: every hop pipelines the whole object)
//     T(d) = L log_d(n) + d S / B       (d >= 2: each parent receives d streams)
// and the degree minimizing T is used. Slots are numbered breadth-first (slot 0 is the
// root; slot i's children are d i + 1 .. d i + d) and filled by arriving objects in the
// generalized in-order traversal (first child, the node, the other children), so the
// objects that arrive first form complete subtrees that reduce while later ones are
// still being produced.
#ifndef CONDUIT_DAEMON_OBJECTS_REDUCE_TREE_H_
#define CONDUIT_DAEMON_OBJECTS_REDUCE_TREE_H_

#include <vector>

namespace conduit::objects {

struct ReduceTree {
  int n = 0;
  int degree = 1;
  std::vector<int> parent;                 // -1 for the root
  std::vector<std::vector<int>> children;  // in order
  std::vector<int> fill_order;             // slots in the order arriving objects take them
};

ReduceTree BuildReduceTree(int n, int degree);
// Eq. 2.1 in seconds; bytes, bytes/s, seconds.
double ReduceTreeTime(int n, int degree, double bytes, double bandwidth, double latency);
int ChooseReduceDegree(int n, double bytes, double bandwidth, double latency);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_REDUCE_TREE_H_
