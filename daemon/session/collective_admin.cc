#include "session/collective_admin.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "reduce/reduce.h"
#include "topology/locality.h"

namespace conduit {
namespace {

// The communicator whose key starts with `prefix` (views show 8 hex digits of a key, never
// all of it); *error says why there is none (HTTP status and text).
std::shared_ptr<Communicator> FindComm(CommRegistry* registry, const std::string& prefix, AdminReply* error) {
  std::shared_ptr<Communicator> found;
  int matches = 0;
  if (!prefix.empty()) {
    for (auto& comm : registry->List()) {
      if (CommKeyShort(comm->key()).rfind(prefix, 0) == 0) {
        found = comm;
        ++matches;
      }
    }
  }
  if (matches == 1) return found;
  *error = matches == 0 ? AdminReply::Error(404, "no communicator " + prefix + " on this daemon")
                        : AdminReply::Error(409, "communicator key prefix " + prefix + " is ambiguous on this daemon; "
                                                 "give more of the key");
  return nullptr;
}

Json IntList(const std::vector<int>& v) {
  Json list = Json::Array();
  for (int x : v) list.push_back(x);
  return list;
}

// {epoch, ring: [host index], ring_hosts: ["ip:port"], rack_crossings, allreduce_algo}
Json ConfigJson(const CommConfig& config, const Membership& m, const Topology* topology) {
  Json c = Json::Object();
  c["epoch"] = config.epoch;
  c["ring"] = IntList(config.ring);
  Json hosts = Json::Array();
  for (int h : config.ring) hosts.push_back(m.host_addrs[h]);
  c["ring_hosts"] = std::move(hosts);
  if (topology != nullptr) c["rack_crossings"] = RackCrossings(*topology, m.host_addrs, config.ring);
  c["allreduce_algo"] = config.allreduce_algo;
  return c;
}

Json TrafficJson(const TrafficCounts& t, uint64_t payload) {
  Json m = Json::Object();
  m["program_copies"] = t.program_copies;
  m["local_copies"] = t.local_copies;
  m["reduce_writes"] = t.reduce_writes;
  m["socket_sends"] = t.socket_sends;
  m["socket_receives"] = t.socket_receives;
  m["device_writes"] = t.device_writes;
  m["device_to_host"] = t.device_to_host;
  m["host_to_device"] = t.host_to_device;
  m["per_payload_byte"] = payload > 0 ? Json(static_cast<double>(t.total()) / static_cast<double>(payload)) : Json();
  return m;
}

Json Describe(const Communicator& comm) {
  Json c = Json::Object();
  c["key"] = CommKeyShort(comm.key());
  c["nranks"] = comm.nranks();
  c["exe"] = comm.exe();
  const bool ready = comm.ready();
  c["ready"] = ready;
  if (ready) {
    const Membership& m = comm.membership();
    Json hosts = Json::Array();
    for (const auto& h : m.host_addrs) hosts.push_back(h);
    c["hosts"] = std::move(hosts);
    c["this_host"] = m.my_host;
    c["protocol_version"] = m.protocol_version;
    Json local = Json::Array();
    for (int r : comm.local_ranks()) local.push_back(r);
    c["local_ranks"] = std::move(local);
    std::shared_ptr<const Topology> topology = comm.fabric() ? comm.fabric()->topology().Get() : nullptr;
    c["config"] = ConfigJson(*comm.config(), m, topology.get());
    c["reconfigurations"] = comm.reconfigurations();
    Json links = Json::Array();
    for (const LinkReport& l : comm.Links()) {
      Json e = Json::Object();
      e["host"] = l.host;
      e["channel"] = l.channel;
      e["path"] = l.path;
      e["local_ip"] = l.local_ip.empty() ? Json() : Json(l.local_ip);
      e["peer"] = l.remote;
      e["epoch"] = l.epoch;
      links.push_back(std::move(e));
    }
    c["links"] = std::move(links);
    std::shared_ptr<TenantState> tenant =
        comm.fabric() ? comm.fabric()->tenants().Resolve(comm.exe(), CommKeyText(comm.key())) : nullptr;
    c["tenant"] = tenant ? Json(tenant->policy().name) : Json();
  }
  const CommStats& s = comm.stats();
  c["collectives"] = s.ops();
  c["bytes"] = s.bytes();
  c["errors"] = s.errors();
  Json p2p = Json::Object();
  p2p["direct_bytes"] = s.device_p2p_bytes(true);
  p2p["through_host_bytes"] = s.device_p2p_bytes(false);
  c["device_p2p"] = std::move(p2p);
  // Host memory written for Send and Recv (all-to-all, gather, scatter) here, summed.
  c["p2p_memory"] = TrafficJson(s.p2p_traffic(), 0);
  c["p2p_groups"] = s.p2p_groups();
  Json waiting = Json::Object();
  waiting["bytes"] = comm.p2p_waiting_bytes();
  waiting["peak_bytes"] = comm.p2p_waiting_peak_bytes();
  c["p2p_waiting"] = std::move(waiting);
  c["next_seq"] = comm.collective_seq();
  Status failure = comm.failure();
  c["failure"] = failure.ok() ? Json() : Json(failure.message());
  Json options = Json::Object();
  options["allreduce_algo"] = comm.options().allreduce_algo;
  // What this communicator uses: the setting, or what its hosts and protocol version imply
  // (null until the rendezvous has fixed them).
  const std::optional<size_t>& rd = comm.options().rd_max_bytes;
  const std::optional<size_t>& rh = comm.options().rh_max_bytes;
  if (ready) {
    const int nhosts = static_cast<int>(comm.membership().host_addrs.size());
    options["rd_max_bytes"] = RecursiveDoublingMaxBytes(rd, nhosts, comm.membership().protocol_version);
    options["rh_max_bytes"] = HalvingDoublingMaxBytes(rh, comm.membership().protocol_version);
  } else {
    options["rd_max_bytes"] = rd.has_value() ? Json(*rd) : Json();
    options["rh_max_bytes"] = rh.has_value() ? Json(*rh) : Json();
  }
  options["chunk_bytes"] = comm.options().chunk_bytes;
  options["p2p_queue_bytes"] = comm.options().p2p_queue_bytes;
  options["timeout_ms"] = comm.options().timeout_ms;
  c["options"] = std::move(options);
  return c;
}

// Bytes written to memory on this host, by who, and per payload byte (CollRecord::
// payload_bytes): docs/design.md "Copies per payload byte".
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
  e["result_area"] = r.result_area;
  e["epoch"] = r.config ? Json(r.config->epoch) : Json();
  e["ring"] = r.config ? IntList(r.config->ring) : Json();
  e["start_unix_us"] = r.start_unix_us;
  e["duration_us"] = r.duration_us;
  e["error"] = r.error.empty() ? Json() : Json(r.error);
  e["memory"] = TrafficJson(r.traffic, r.payload_bytes);
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
      w.Sample("conduit_collective_ops_total", {{"comm", CommKeyShort(c->key())}, {"op", OpKindName(k)}},
               static_cast<double>(c->stats().ops_of(k)));
    }
  }
  w.Family("conduit_collective_bytes_total", "counter", "Bytes of one rank's buffer summed over collectives.");
  for (auto& c : comms) {
    for (uint8_t k : kinds) {
      w.Sample("conduit_collective_bytes_total", {{"comm", CommKeyShort(c->key())}, {"op", OpKindName(k)}},
               static_cast<double>(c->stats().bytes_of(k)));
    }
  }
  w.Family("conduit_collective_memory_bytes_total", "counter",
           "Bytes written to host memory by collectives on this daemon, per communicator, op and writer "
           "(program copies into and out of staging, local copies, reductions, socket sends and receives).");
  for (auto& c : comms) {
    for (uint8_t k : kinds) {
      if (c->stats().ops_of(k) == 0) continue;
      const TrafficCounts t = c->stats().traffic_of(k);
      const std::pair<const char*, uint64_t> by[] = {{"program_copy", t.program_copies}, {"local_copy", t.local_copies},
                                                     {"reduce", t.reduce_writes}, {"socket_send", t.socket_sends},
                                                     {"socket_receive", t.socket_receives},
                                                     {"device_write", t.device_writes},
                                                     {"device_to_host", t.device_to_host},
                                                     {"host_to_device", t.host_to_device}};
      for (const auto& [name, value] : by) {
        w.Sample("conduit_collective_memory_bytes_total",
                 {{"comm", CommKeyShort(c->key())}, {"op", OpKindName(k)}, {"by", name}}, static_cast<double>(value));
      }
    }
  }
  w.Family("conduit_p2p_memory_bytes_total", "counter",
           "Bytes written to host memory for point-to-point ops (Send, Recv) on this daemon, per communicator and "
           "writer (program copies into and out of staging, local copies into receives, socket sends and receives).");
  for (auto& c : comms) {
    const TrafficCounts t = c->stats().p2p_traffic();
    const std::pair<const char*, uint64_t> by[] = {{"program_copy", t.program_copies}, {"local_copy", t.local_copies},
                                                   {"socket_send", t.socket_sends},
                                                   {"socket_receive", t.socket_receives}};
    for (const auto& [name, value] : by) {
      w.Sample("conduit_p2p_memory_bytes_total", {{"comm", CommKeyShort(c->key())}, {"by", name}},
               static_cast<double>(value));
    }
  }
  w.Family("conduit_collective_errors_total", "counter", "Collectives that failed, per communicator.");
  for (auto& c : comms) {
    w.Sample("conduit_collective_errors_total", {{"comm", CommKeyShort(c->key())}},
             static_cast<double>(c->stats().errors()));
  }
  w.Family("conduit_device_p2p_bytes_total", "counter",
           "Bytes point-to-point receives on this daemon took from or into device buffers, per communicator and "
           "path: direct (a GPU copy from a local sender's buffer) or through_host (pinned memory, the network).");
  for (auto& c : comms) {
    for (bool direct : {true, false}) {
      w.Sample("conduit_device_p2p_bytes_total", {{"comm", CommKeyShort(c->key())}, {"path", direct ? "direct" : "through_host"}},
               static_cast<double>(c->stats().device_p2p_bytes(direct)));
    }
  }
  w.Family("conduit_p2p_waiting_bytes", "gauge",
           "Bytes of point-to-point sends from other hosts waiting here for their receives, per communicator "
           "(at most conduitd --p2p-queue-bytes beyond what posted receives take).");
  for (auto& c : comms) {
    w.Sample("conduit_p2p_waiting_bytes", {{"comm", CommKeyShort(c->key())}}, static_cast<double>(c->p2p_waiting_bytes()));
  }
  w.Family("conduit_comm_config_epoch", "gauge", "Configuration epoch each communicator runs with (0: as created).");
  for (auto& c : comms) {
    if (c->ready()) w.Sample("conduit_comm_config_epoch", {{"comm", CommKeyShort(c->key())}}, static_cast<double>(c->config()->epoch));
  }
  w.Family("conduit_comm_reconfigurations_total", "counter", "Reconfigurations this daemon applied, per communicator.");
  for (auto& c : comms) {
    w.Sample("conduit_comm_reconfigurations_total", {{"comm", CommKeyShort(c->key())}},
             static_cast<double>(c->reconfigurations()));
  }
  w.Family("conduit_collective_latency_seconds", "histogram",
           "Time from the last local rank's arrival to the result, per communicator and op.");
  for (auto& c : comms) {
    for (uint8_t k : kinds) {
      if (c->stats().ops_of(k) == 0) continue;
      w.Histogram("conduit_collective_latency_seconds", {{"comm", CommKeyShort(c->key())}, {"op", OpKindName(k)}},
                  c->stats().latency_of(k));
    }
  }
}

}  // namespace

void AddCollectiveAdmin(AdminApi* api, CommRegistry* registry) {
  api->Route("GET", "/v1/communicators", AdminAccess::kRead, [registry](const AdminRequest&) {
    Json list = Json::Array();
    for (auto& comm : registry->List()) list.push_back(Describe(*comm));
    Json body = Json::Object();
    body["communicators"] = std::move(list);
    return AdminReply::Ok(std::move(body));
  });
  api->Route("GET", "/v1/communicators/{key}", AdminAccess::kRead, [registry](const AdminRequest& req) {
    AdminReply error;
    auto comm = FindComm(registry, req.params.at("key"), &error);
    if (!comm) return error;
    return AdminReply::Ok(Describe(*comm));
  });
  api->Route("GET", "/v1/communicators/{key}/trace", AdminAccess::kRead, [registry](const AdminRequest& req) {
    AdminReply error;
    auto comm = FindComm(registry, req.params.at("key"), &error);
    if (!comm) return error;
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
    body["key"] = CommKeyShort(comm->key());
    body["trace"] = std::move(list);
    return AdminReply::Ok(std::move(body));
  });
  api->Route("POST", "/v1/communicators/{key}/reconfigure", AdminAccess::kOperator, [registry](const AdminRequest& req) {
    AdminReply error;
    auto comm = FindComm(registry, req.params.at("key"), &error);
    if (!comm) return error;
    if (!comm->ready()) return AdminReply::Error(409, "communicator " + req.params.at("key") + " is still being set up");
    const Membership& m = comm->membership();
    ReconfigContext ctx;
    ctx.nhosts = static_cast<int>(m.host_addrs.size());
    ctx.current_ring = comm->config()->ring;
    ctx.locality_ring = registry->fabric() ? LocalityRing(*registry->fabric()->topology().Get(), m.host_addrs)
                                           : ctx.current_ring;
    ReconfigPlan plan;
    int wait_ms = kDefaultReconfigWaitMs;
    Status st = ParseReconfigPlan(req.body, ctx, &plan, &wait_ms);
    if (!st.ok()) return AdminReply::FromStatus(st);
    ReconfigResult result;
    st = comm->Reconfigure(plan, wait_ms, &result);
    if (!st.ok()) return AdminReply::Error(st.code() == ncclInvalidArgument ? 400 : 409, st.message());
    Json body = Json::Object();
    body["key"] = CommKeyShort(comm->key());
    body["epoch"] = result.epoch;
    body["applied"] = result.applied;
    std::shared_ptr<const Topology> topology = registry->fabric() ? registry->fabric()->topology().Get() : nullptr;
    body["config"] = ConfigJson(*comm->config(), m, topology.get());
    AdminReply reply = AdminReply::Ok(std::move(body));
    if (!result.applied) reply.http_status = 202;  // accepted; collectives must still reach the switch point
    return reply;
  });
  api->AddMetrics([registry](MetricsWriter& w) { WriteMetrics(registry, w); });
}

}  // namespace conduit
