#include "auth_context.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>

#include "common/log.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

// grpc_auth_context of gRPC 1.51, in machine words: [trace_ (builds without NDEBUG)],
// refs_, chained_, properties_ {array, count, capacity}, peer_identity_property_name_,
// extension_.
struct Layout {
  bool known = false;
  size_t words = 0;        // sizeof(grpc_auth_context) / 8
  size_t refs_word = 0;    // where the reference count is
};

// grpc_auth_property, as grpc_security.h declares it: what libgrpc allocated per property.
void FreeProperties(uintptr_t* words, size_t at) {
  auto* array = reinterpret_cast<grpc_auth_property*>(words[at]);
  for (size_t i = 0; i < words[at + 1]; ++i) {
    Real().gpr_free(array[i].name);
    Real().gpr_free(array[i].value);
  }
  Real().gpr_free(array);
}

Layout Probe() {
  constexpr size_t kWords = 16;
  uintptr_t probe[kWords] = {};
  Real().grpc_auth_context_add_cstring_property(reinterpret_cast<grpc_auth_context*>(probe), "probe", "x");
  // Where libgrpc put the property array: {array, count 1, capacity 8}, nothing else set.
  for (size_t at : {size_t{2}, size_t{3}}) {
    bool shape = probe[at] != 0 && probe[at + 1] == 1 && probe[at + 2] == 8;
    size_t others = 0;
    for (size_t i = 0; i < kWords; ++i) others += (i < at || i > at + 2) && probe[i] != 0;
    if (shape && others == 0) {
      FreeProperties(probe, at);
      // refs_ comes right before chained_, which comes right before properties_.
      return Layout{true, at + 5, at - 2};
    }
  }
  CLOG_WARN("cannot tell this libgrpc's grpc_auth_context layout: auth_context() stays empty on managed calls");
  return Layout{};
}

const Layout& TheLayout() {
  static const Layout layout = Probe();
  return layout;
}

std::atomic<intptr_t>* Refs(grpc_auth_context* ctx) {
  return reinterpret_cast<std::atomic<intptr_t>*>(reinterpret_cast<uintptr_t*>(ctx) + TheLayout().refs_word);
}

}  // namespace

grpc_auth_context* NewAuthContext(const AuthProperties& props) {
  const Layout& layout = TheLayout();
  if (props.empty() || !layout.known) return nullptr;
  static_assert(sizeof(std::atomic<intptr_t>) == sizeof(uintptr_t));
  // Allocated as libgrpc++'s `delete` of the last reference frees it (global operator new).
  void* memory = ::operator new(layout.words * sizeof(uintptr_t));
  memset(memory, 0, layout.words * sizeof(uintptr_t));
  auto* ctx = static_cast<grpc_auth_context*>(memory);
  new (Refs(ctx)) std::atomic<intptr_t>(1);
  const char* identity = nullptr;
  for (const auto& [name, value] : props) {
    Real().grpc_auth_context_add_property(ctx, name.c_str(), value.data(), value.size());
    if (name == GRPC_X509_SAN_PROPERTY_NAME) {
      identity = GRPC_X509_SAN_PROPERTY_NAME;
    } else if (name == GRPC_X509_CN_PROPERTY_NAME && identity == nullptr) {
      identity = GRPC_X509_CN_PROPERTY_NAME;
    }
  }
  if (identity != nullptr) Real().grpc_auth_context_set_peer_identity_property_name(ctx, identity);
  return ctx;
}

grpc_auth_context* RefAuthContext(grpc_auth_context* ctx) {
  if (ctx != nullptr) Refs(ctx)->fetch_add(1, std::memory_order_relaxed);
  return ctx;
}

}  // namespace conduit::grpcshim
