#include "session/collective_admin.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "reduce/reduce.h"

namespace conduit {
namespace {

std::shared_ptr<Communicator> FindComm(CommRegistry* registry, const std::string& text) {
  for (auto& comm : registry->List()) {
    if (CommKeyText(comm->key()) == text) return comm;
  }
  return nullptr;
}

Json Describe(const Communicator& comm) {
  Json c = Json::Object();
  c["key"] = CommKeyText(comm.key());
  c["nranks"] = comm.nranks();
  const bool ready = comm.ready();
  c["ready"] = ready;
  if (ready) {
    const Membership& m = comm.membership();
    Json hosts = Json::Array();
    for (const auto& h : m.host_addrs) hosts.push_back(h);
    c["hosts"] = std::move(hosts);
    c["this_host"] = m.my_host;
    Json local = Json::Array();
    for (int r : comm.local_ranks()) local.push_back(r);
    c["local_ranks"] = std::move(local);
  }
  const CommStats& s = comm.stats();
  c["collectives"] = s.ops();
  c["bytes"] = s.bytes();
  c["errors"] = s.errors();
  c["next_seq"] = comm.collective_seq();
  Status failure = comm.failure();
  c["failure"] = failure.ok() ? Json() : Json(failure.message());
  Json options = Json::Object();
  options["allreduce_algo"] = comm.options().allreduce_algo;
  options["rd_max_bytes"] = comm.options().rd_max_bytes;
  options["chunk_bytes"] = comm.options().chunk_bytes;
  options["timeout_ms"] = comm.options().timeout_ms;
  c["options"] = std::move(options);
  return c;
}

Json TraceEntry(const CollRecord& r) {
  Json e = Json::Object();
  e["seq"] = r.seq;
  e["op"] = OpKindName(r.kind);
  e["dtype"] = DataTypeName(static_cast<ncclDataType_t>(r.dtype));
  e["redop"] = r.redop;
  e["root"] = r.root;
  e["count"] = r.count;
  e["bytes"] = r.bytes;
  e["algorithm"] = r.algorithm;
  e["start_unix_us"] = r.start_unix_us;
  e["duration_us"] = r.duration_us;
  e["error"] = r.error.empty() ? Json() : Json(r.error);
  return e;
}

void WriteMetrics(CommRegistry* registry, MetricsWriter& w) {
  auto comms = registry->List();
  w.Family("conduit_communicators", "gauge", "Communicators with ranks on this daemon.");
  w.Sample("conduit_communicators", {}, static_cast<double>(comms.size()));
  const uint8_t kinds[] = {shimproto::kAllReduce, shimproto::kBroadcast, shimproto::kReduce, shimproto::kAllGather,
                           shimproto::kReduceScatter};
  w.Family("conduit_collective_ops_total", "counter", "Collectives run, per communicator and op.");
  for (auto& c : comms) {
    for (uint8_t k : kinds) {
      w.Sample("conduit_collective_ops_total", {{"comm", CommKeyText(c->key())}, {"op", OpKindName(k)}},
               static_cast<double>(c->stats().ops_of(k)));
    }
  }
  w.Family("conduit_collective_bytes_total", "counter", "Bytes of one rank's buffer summed over collectives.");
  for (auto& c : comms) {
    for (uint8_t k : kinds) {
      w.Sample("conduit_collective_bytes_total", {{"comm", CommKeyText(c->key())}, {"op", OpKindName(k)}},
               static_cast<double>(c->stats().bytes_of(k)));
    }
  }
  w.Family("conduit_collective_errors_total", "counter", "Collectives that failed, per communicator.");
  for (auto& c : comms) {
    w.Sample("conduit_collective_errors_total", {{"comm", CommKeyText(c->key())}},
             static_cast<double>(c->stats().errors()));
  }
  w.Family("conduit_collective_latency_seconds", "histogram",
           "Time from the last local rank's arrival to the result, per communicator and op.");
  for (auto& c : comms) {
    for (uint8_t k : kinds) {
      if (c->stats().ops_of(k) == 0) continue;
      w.Histogram("conduit_collective_latency_seconds", {{"comm", CommKeyText(c->key())}, {"op", OpKindName(k)}},
                  c->stats().latency_of(k));
    }
  }
}

}  // namespace

std::string CommKeyText(uint64_t key) {
  char buf[20];
  snprintf(buf, sizeof(buf), "%016" PRIx64, key);
  return buf;
}

void AddCollectiveAdmin(AdminApi* api, CommRegistry* registry) {
  api->Route("GET", "/v1/communicators", AdminAccess::kRead, [registry](const AdminRequest&) {
    Json list = Json::Array();
    for (auto& comm : registry->List()) list.push_back(Describe(*comm));
    Json body = Json::Object();
    body["communicators"] = std::move(list);
    return AdminReply::Ok(std::move(body));
  });
  api->Route("GET", "/v1/communicators/{key}", AdminAccess::kRead, [registry](const AdminRequest& req) {
    auto comm = FindComm(registry, req.params.at("key"));
    if (!comm) return AdminReply::Error(404, "no communicator " + req.params.at("key") + " on this daemon");
    return AdminReply::Ok(Describe(*comm));
  });
  api->Route("GET", "/v1/communicators/{key}/trace", AdminAccess::kRead, [registry](const AdminRequest& req) {
    auto comm = FindComm(registry, req.params.at("key"));
    if (!comm) return AdminReply::Error(404, "no communicator " + req.params.at("key") + " on this daemon");
    size_t limit = 100;
    if (auto it = req.query.find("limit"); it != req.query.end()) {
      char* end = nullptr;
      unsigned long long n = strtoull(it->second.c_str(), &end, 10);
      if (it->second.empty() || *end != '\0' || n == 0) return AdminReply::Error(400, "limit must be a positive integer");
      limit = static_cast<size_t>(n);
    }
    Json list = Json::Array();
    for (const CollRecord& r : comm->stats().Trace(limit)) list.push_back(TraceEntry(r));
    Json body = Json::Object();
    body["key"] = CommKeyText(comm->key());
    body["trace"] = std::move(list);
    return AdminReply::Ok(std::move(body));
  });
  api->AddMetrics([registry](MetricsWriter& w) { WriteMetrics(registry, w); });
}

}  // namespace conduit
