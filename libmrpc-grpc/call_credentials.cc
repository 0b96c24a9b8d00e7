#include "call_credentials.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "byte_buffers.h"
#include "handoff.h"
#include "metadata.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

// One part of a call credentials object: a plugin the program wrote, or fixed metadata (an
// access token).
struct Part {
  grpc_metadata_credentials_plugin plugin{};
  std::vector<std::pair<std::string, std::string>> fixed;
};

// What the shim knows of a call credentials object: its minimum security level and, when
// every part of it is known (opaque false), the parts in the order gRPC asks them.
struct Known {
  grpc_security_level min_level = GRPC_PRIVACY_AND_INTEGRITY;
  bool opaque = true;  // one of gRPC's own kinds the shim cannot apply (JWT, Google, IAM, STS)
  std::vector<Part> parts;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<const grpc_call_credentials*, Known> by_creds;
};

Registry& Creds() {
  static Registry* r = new Registry();
  return *r;
}

// Anything not noted is one of gRPC's own kinds: privacy and integrity.
Known Lookup(const grpc_call_credentials* creds) {
  Registry& r = Creds();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_creds.find(creds);
  return it == r.by_creds.end() ? Known{} : it->second;
}

// One plugin's answer, filled by its callback (possibly after the caller stopped waiting).
struct Answer {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc_status_code code = GRPC_STATUS_OK;
  std::string details;
  std::vector<std::pair<std::string, std::string>> metadata;
  bool valid = true;
};

void Fill(Answer* a, const grpc_metadata* md, size_t count, grpc_status_code code, const char* details) {
  a->code = code;
  a->details = details != nullptr ? details : "";
  if (code != GRPC_STATUS_OK) return;
  a->valid = MetadataIsValid(md, count);
  for (size_t i = 0; a->valid && i < count; ++i) {
    a->metadata.emplace_back(std::string(SliceView(md[i].key)), std::string(SliceView(md[i].value)));
  }
}

void OnPluginAnswer(void* user_data, const grpc_metadata* md, size_t count, grpc_status_code code,
                    const char* details) {
  TakeOver(user_data);  // handed over through gRPC's executor (handoff.h)
  auto* box = static_cast<std::shared_ptr<Answer>*>(user_data);
  std::shared_ptr<Answer> a = *box;
  delete box;
  std::lock_guard<std::mutex> lock(a->mu);
  Fill(a.get(), md, count, code, details);
  a->done = true;
  a->cv.notify_all();
}

// "/pkg.Service/Method" -> service URL "https://authority/pkg.Service" (an insecure
// channel's URL scheme is empty) and method "Method", as gRPC builds the plugin's context.
std::pair<std::string, std::string> ServiceUrlAndMethod(std::string_view method, std::string_view authority,
                                                        bool tls) {
  size_t slash = method.rfind('/');
  std::string_view service = slash == std::string_view::npos ? "" : method.substr(0, slash);
  std::string_view name = slash == std::string_view::npos ? "" : method.substr(slash + 1);
  return {std::string(tls ? "https" : "") + "://" + std::string(authority) + std::string(service),
          std::string(name)};
}

}  // namespace

void NotePluginCredentials(const grpc_call_credentials* creds, const grpc_metadata_credentials_plugin& plugin,
                           grpc_security_level min_level) {
  Registry& r = Creds();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_creds[creds] = Known{min_level, false, {Part{plugin, {}}}};
}

void NoteAccessToken(const grpc_call_credentials* creds, const char* token) {
  Registry& r = Creds();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_creds[creds] = Known{GRPC_PRIVACY_AND_INTEGRITY, false, {Part{{}, {{"authorization", std::string("Bearer ") + token}}}}};
}

void NoteCompositeCredentials(const grpc_call_credentials* composite, const grpc_call_credentials* first,
                              const grpc_call_credentials* second) {
  Known a = Lookup(first), b = Lookup(second);
  Known c;
  c.min_level = std::max(a.min_level, b.min_level);  // gRPC: the strictest part's
  c.opaque = a.opaque || b.opaque;
  c.parts = a.parts;
  c.parts.insert(c.parts.end(), b.parts.begin(), b.parts.end());
  Registry& r = Creds();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_creds[composite] = std::move(c);
}

void ForgetCallCredentials(const grpc_call_credentials* creds) {
  Registry& r = Creds();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_creds.erase(creds);
}

CredentialsResult ApplyCallCredentials(const grpc_call_credentials* creds, std::string_view method,
                                       std::string_view authority, bool tls, int wait_ms) {
  CredentialsResult result;
  Known known = Lookup(creds);
  if (!tls && known.min_level != GRPC_SECURITY_NONE) {
    result.code = GRPC_STATUS_UNAUTHENTICATED;
    result.details =
        "Established channel does not have a sufficient security level to transfer call credential.";
    return result;
  }
  if (known.opaque) {
    result.code = GRPC_STATUS_UNAUTHENTICATED;
    result.details =
        "conduit: these call credentials (JWT, Google, IAM or STS) are not applied on a channel conduitd carries; "
        "run the program with CONDUIT_DISABLE=1 or use an access token or a metadata plugin";
    return result;
  }
  auto [service_url, method_name] = ServiceUrlAndMethod(method, authority, tls);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(wait_ms, 0));
  for (const Part& part : known.parts) {
    for (const auto& kv : part.fixed) result.metadata.push_back(kv);
    const grpc_metadata_credentials_plugin& plugin = part.plugin;
    if (plugin.get_metadata == nullptr) continue;
    grpc_auth_metadata_context context{service_url.c_str(), method_name.c_str(), nullptr, nullptr};
    auto answer = std::make_shared<Answer>();
    auto* box = new std::shared_ptr<Answer>(answer);  // the callback's own reference
    grpc_metadata md[GRPC_METADATA_CREDENTIALS_PLUGIN_SYNC_MAX];
    size_t count = 0;
    grpc_status_code code = GRPC_STATUS_OK;
    const char* details = nullptr;
    HandOff(box);
    if (plugin.get_metadata(plugin.state, context, OnPluginAnswer, box, md, &count, &code, &details) != 0) {
      delete box;  // answered here: the callback is not called
      Fill(answer.get(), md, count, code, details);
      for (size_t i = 0; i < count; ++i) {
        Real().grpc_slice_unref(md[i].key);
        Real().grpc_slice_unref(md[i].value);
      }
      Real().gpr_free(const_cast<char*>(details));
    } else {
      std::unique_lock<std::mutex> lock(answer->mu);
      if (!answer->cv.wait_until(lock, deadline, [&] { return answer->done; })) {
        result.code = GRPC_STATUS_DEADLINE_EXCEEDED;
        result.details = "Deadline Exceeded";
        return result;
      }
    }
    if (answer->code != GRPC_STATUS_OK) {
      result.code = GRPC_STATUS_UNAVAILABLE;
      result.details = "Getting metadata from plugin failed with error: " + answer->details;
      result.metadata.clear();
      return result;
    }
    if (!answer->valid) {
      result.code = GRPC_STATUS_UNAVAILABLE;
      result.details = "Illegal metadata";
      result.metadata.clear();
      return result;
    }
    for (auto& kv : answer->metadata) result.metadata.push_back(std::move(kv));
  }
  return result;
}

}  // namespace conduit::grpcshim
