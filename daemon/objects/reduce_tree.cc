#include "objects/reduce_tree.h"

#include <cmath>
#include <functional>

namespace conduit::objects {

ReduceTree BuildReduceTree(int n, int degree) {
  ReduceTree t;
  t.n = n;
  t.degree = degree < 1 ? 1 : degree;
  t.parent.assign(n, -1);
  t.children.assign(n, {});
  for (int i = 1; i < n; ++i) {
    int p = (i - 1) / t.degree;
    t.parent[i] = p;
    t.children[p].push_back(i);
  }
  std::function<void(int)> visit = [&](int s) {
    const auto& c = t.children[s];
    if (!c.empty()) visit(c[0]);
    t.fill_order.push_back(s);
    for (size_t k = 1; k < c.size(); ++k) visit(c[k]);
  };
  if (n > 0) visit(0);
  return t;
}

double ReduceTreeTime(int n, int degree, double bytes, double bandwidth, double latency) {
  if (degree <= 1) return n * latency + bytes / bandwidth;
  double height = std::log(static_cast<double>(n)) / std::log(static_cast<double>(degree));  // log_d(n), as in the paper
  return latency * height + degree * bytes / bandwidth;
}

int ChooseReduceDegree(int n, double bytes, double bandwidth, double latency) {
  int best = 1;
  double best_time = ReduceTreeTime(n, 1, bytes, bandwidth, latency);
  for (int d = 2; d <= n; ++d) {
    double t = ReduceTreeTime(n, d, bytes, bandwidth, latency);
    if (t < best_time) {
      best_time = t;
      best = d;
    }
  }
  return best;
}

}  // namespace conduit::objects
