// The C ABI (hoplite_c.h) over hoplite::Client.
#include "conduit/hoplite_c.h"

#include <cstring>

#include "conduit/hoplite.h"

struct hoplite_client {
  std::unique_ptr<hoplite::Client> client;
};

struct hoplite_view {
  std::shared_ptr<const hoplite::ObjectView> view;
};

namespace {

int Done(const hoplite::Status& st, char* err, size_t errlen) {
  if (err != nullptr && errlen > 0) {
    size_t n = std::min(st.message().size(), errlen - 1);
    memcpy(err, st.message().data(), n);
    err[n] = '\0';
  }
  return static_cast<int>(st.code());
}

std::vector<std::string> Ids(const char* const* ids, const size_t* lens, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(ids[i], lens[i]);
  return out;
}

}  // namespace

extern "C" {

int hoplite_connect(const char* socket_path, hoplite_client** out, char* err, size_t errlen) {
  auto c = new hoplite_client;
  hoplite::Status st = hoplite::Client::Connect(&c->client, socket_path != nullptr ? socket_path : "");
  if (!st.ok()) {
    delete c;
    return Done(st, err, errlen);
  }
  *out = c;
  return Done(st, err, errlen);
}

void hoplite_close(hoplite_client* c) { delete c; }

int hoplite_put(hoplite_client* c, const char* id, size_t idlen, const void* data, uint64_t size, char* err,
                size_t errlen) {
  return hoplite_put_access(c, id, idlen, data, size, HOPLITE_ACCESS_DEFAULT, err, errlen);
}

int hoplite_put_access(hoplite_client* c, const char* id, size_t idlen, const void* data, uint64_t size, int access,
                       char* err, size_t errlen) {
  return Done(c->client->Put(std::string(id, idlen), data, size, static_cast<hoplite::Access>(access)), err, errlen);
}

int hoplite_get(hoplite_client* c, const char* id, size_t idlen, int timeout_ms, hoplite_alloc_fn alloc, void* ctx,
                char* err, size_t errlen) {
  return Done(c->client->Get(std::string(id, idlen), [&](size_t size) { return alloc(ctx, size); }, timeout_ms), err,
              errlen);
}

int hoplite_get_readonly(hoplite_client* c, const char* id, size_t idlen, int timeout_ms, hoplite_view** view,
                         const void** data, uint64_t* size, char* err, size_t errlen) {
  std::shared_ptr<const hoplite::ObjectView> v;
  hoplite::Status st = c->client->GetReadOnly(std::string(id, idlen), &v, timeout_ms);
  if (st.ok()) {
    *view = new hoplite_view{v};
    *data = v->data();
    *size = v->size();
  }
  return Done(st, err, errlen);
}

void hoplite_view_release(hoplite_view* v) { delete v; }

int hoplite_delete(hoplite_client* c, const char* id, size_t idlen, char* err, size_t errlen) {
  return Done(c->client->Delete(std::string(id, idlen)), err, errlen);
}

int hoplite_reduce(hoplite_client* c, const char* target, size_t targetlen, const char* const* ids,
                   const size_t* idlens, size_t n, size_t num_objects, int op, int dtype, int timeout_ms,
                   uint32_t* used, size_t* nused, char* err, size_t errlen) {
  return hoplite_reduce_access(c, target, targetlen, ids, idlens, n, num_objects, op, dtype, timeout_ms,
                               HOPLITE_ACCESS_DEFAULT, used, nused, err, errlen);
}

int hoplite_reduce_access(hoplite_client* c, const char* target, size_t targetlen, const char* const* ids,
                          const size_t* idlens, size_t n, size_t num_objects, int op, int dtype, int timeout_ms,
                          int access, uint32_t* used, size_t* nused, char* err, size_t errlen) {
  std::vector<size_t> u;
  hoplite::Status st = c->client->Reduce(std::string(target, targetlen), Ids(ids, idlens, n), num_objects,
                                         static_cast<hoplite::ReduceOp>(op), static_cast<hoplite::DataType>(dtype),
                                         timeout_ms, &u, static_cast<hoplite::Access>(access));
  *nused = std::min(u.size(), n);
  for (size_t i = 0; i < *nused; ++i) used[i] = static_cast<uint32_t>(u[i]);
  return Done(st, err, errlen);
}

int hoplite_wait(hoplite_client* c, const char* const* ids, const size_t* idlens, size_t n, size_t num_ready,
                 int timeout_ms, uint32_t* ready, size_t* nready, char* err, size_t errlen) {
  std::vector<size_t> r;
  hoplite::Status st = c->client->Wait(Ids(ids, idlens, n), num_ready, timeout_ms, &r);
  *nready = std::min(r.size(), n);
  for (size_t i = 0; i < *nready; ++i) ready[i] = static_cast<uint32_t>(r[i]);
  return Done(st, err, errlen);
}

int hoplite_state(hoplite_client* c, char* buf, size_t cap, size_t* len, char* err, size_t errlen) {
  std::string json;
  hoplite::Status st = c->client->State(&json);
  *len = json.size();
  if (st.ok() && cap > 0) {
    size_t n = std::min(cap - 1, json.size());
    memcpy(buf, json.data(), n);
    buf[n] = '\0';
  }
  return Done(st, err, errlen);
}

}  // extern "C"
