// Expands abi_lists.h into an AbiTable against whichever nccl.h the including
// file saw first. Everything here has internal linkage: the two translation
// units that include it see different headers and must not share code.
//
// Before including, define:
//   ABI_PICK_OVERLOAD(fn, ptr_type)  yields a pointer to the host overload of
//                                    fn (see ABI_DEVICE_HOST_OVERLOADED).
//   ABI_P_TWIN(pfn, fn_ptr)          yields a pointer to pfn, the pncclX
//                                    twin of a device-API host function;
//                                    fn_ptr points to its ncclX spelling.

#ifndef CONDUIT_TESTS_ABI_ABI_TABLE_BUILDER_H_
#define CONDUIT_TESTS_ABI_ABI_TABLE_BUILDER_H_

#include <cxxabi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <type_traits>
#include <typeinfo>

#include "abi_lists.h"
#include "abi_table.h"

namespace conduit_abi {
namespace {

// Demangled so that failure messages read as C++ types.
std::string Demangle(const char* mangled) {
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = (status == 0 && plain != nullptr) ? plain : mangled;
  free(plain);
  return out;
}

template <typename T>
std::string TypeName() {
  return Demangle(typeid(T).name());
}

// Deduces the type of an expression; top-level const and references drop
// out, as they would in a declaration.
template <typename T>
std::string TypeNameOf(const T&) {
  return TypeName<T>();
}

template <typename T>
std::string ValueString(const T& v) {
  using U = std::remove_cv_t<std::remove_reference_t<T>>;
  if constexpr (std::is_array_v<U>) {
    return "\"" + std::string(v) + "\"";
  } else if constexpr (std::is_floating_point_v<U>) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%a", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_pointer_v<U>) {
    return v == nullptr ? "null" : "non-null";
  } else if constexpr (std::is_enum_v<U>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    static_assert(std::is_integral_v<U>);
    if constexpr (std::is_signed_v<U>) {
      return std::to_string(static_cast<long long>(v));
    } else {
      return std::to_string(static_cast<unsigned long long>(v));
    }
  }
}

void Add(AbiTable* t, std::string name, std::string value) {
  t->push_back({std::move(name), std::move(value)});
}

// Static because each including TU needs its own copy built against its own
// headers.
AbiTable BuildAbiTable() {
  AbiTable t;

#define ABI_ADD_ENUMERATOR(e)  \
  Add(&t, #e, ValueString(e)); \
  Add(&t, "type(" #e ")", TypeName<decltype(e)>());
  ABI_ENUMERATORS(ABI_ADD_ENUMERATOR)
#undef ABI_ADD_ENUMERATOR

#define ABI_ADD_DEFINE(m)      \
  Add(&t, #m, ValueString(m)); \
  Add(&t, "type(" #m ")", TypeNameOf(m));
  ABI_DEFINES(ABI_ADD_DEFINE)
#undef ABI_ADD_DEFINE

// Converted first: comparing NULL itself with nullptr draws a Clang warning.
#define ABI_ADD_NULL_DEFINE(m) \
  Add(&t, #m, static_cast<const void*>(m) == nullptr ? "null" : "non-null");
  ABI_NULL_DEFINES(ABI_ADD_NULL_DEFINE)
#undef ABI_ADD_NULL_DEFINE

#define ABI_ADD_VERSION(x, y, z)                \
  Add(&t, "NCCL_VERSION(" #x "," #y "," #z ")", \
      ValueString(NCCL_VERSION(x, y, z)));
  ABI_VERSION_ARGS(ABI_ADD_VERSION)
#undef ABI_ADD_VERSION

#define ABI_ADD_TYPE(T)                                 \
  Add(&t, "typeid(" #T ")", TypeName<T>());             \
  Add(&t, "sizeof(" #T ")", std::to_string(sizeof(T))); \
  Add(&t, "alignof(" #T ")", std::to_string(alignof(T)));
  ABI_TYPES(ABI_ADD_TYPE)
#undef ABI_ADD_TYPE

#define ABI_ADD_ENUM_TYPE(E) \
  Add(&t, "underlying(" #E ")", TypeName<std::underlying_type_t<E>>());
  ABI_ENUM_TYPES(ABI_ADD_ENUM_TYPE)
#undef ABI_ADD_ENUM_TYPE

#define ABI_ADD_FIELD(S, f)                                            \
  Add(&t, "offsetof(" #S ", " #f ")", std::to_string(offsetof(S, f))); \
  Add(&t, "type(" #S "::" #f ")", TypeName<decltype(S::f)>());
#define ABI_ADD_CONFIG_FIELD(f)  \
  ABI_ADD_FIELD(ncclConfig_t, f) \
  Add(&t, "NCCL_CONFIG_INITIALIZER." #f, ValueString(config.f));
#define ABI_ADD_SIM_INFO_FIELD(f) \
  ABI_ADD_FIELD(ncclSimInfo_t, f) \
  Add(&t, "NCCL_SIM_INFO_INITIALIZER." #f, ValueString(sim_info.f));
  const ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ABI_CONFIG_FIELDS(ABI_ADD_CONFIG_FIELD)
  const ncclSimInfo_t sim_info = NCCL_SIM_INFO_INITIALIZER;
  ABI_SIM_INFO_FIELDS(ABI_ADD_SIM_INFO_FIELD)
  ABI_ADD_FIELD(ncclUniqueId, internal)
#undef ABI_ADD_SIM_INFO_FIELD
#undef ABI_ADD_CONFIG_FIELD

  // Function types are read through decltype so that no function is
  // odr-used: the test must link without either library. Naming the
  // deprecated ncclResetDebugInit is the point here, not a mistake.
#define FN_TYPE(ptr) TypeName<decltype(ptr)>()
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define ABI_ADD_FUNCTION(fn)                \
  Add(&t, "&nccl" #fn, FN_TYPE(&nccl##fn)); \
  Add(&t, "&pnccl" #fn, FN_TYPE(&pnccl##fn));
  ABI_FUNCTIONS(ABI_ADD_FUNCTION)
#undef ABI_ADD_FUNCTION
#pragma GCC diagnostic pop

  // Device-API host side.
  Add(&t, "typeid(ncclTeam_t)", TypeName<ncclTeam_t>());
  Add(&t, "sizeof(ncclTeam_t)", std::to_string(sizeof(ncclTeam_t)));
  Add(&t, "alignof(ncclTeam_t)", std::to_string(alignof(ncclTeam_t)));
#define ABI_ADD_TEAM_FIELD(f) ABI_ADD_FIELD(ncclTeam_t, f)
  ABI_TEAM_FIELDS(ABI_ADD_TEAM_FIELD)
#undef ABI_ADD_TEAM_FIELD
#define ABI_ADD_DEVICE_FUNCTION(fn)         \
  Add(&t, "&nccl" #fn, FN_TYPE(&nccl##fn)); \
  Add(&t, "&pnccl" #fn, FN_TYPE(ABI_P_TWIN(pnccl##fn, &nccl##fn)));
  ABI_DEVICE_HOST_FUNCTIONS(ABI_ADD_DEVICE_FUNCTION)
#undef ABI_ADD_DEVICE_FUNCTION
#define ABI_ADD_OVERLOADED(fn, ptr_type)                                \
  Add(&t, "&nccl" #fn, FN_TYPE(ABI_PICK_OVERLOAD(nccl##fn, ptr_type))); \
  Add(&t, "&pnccl" #fn,                                                 \
      FN_TYPE(ABI_P_TWIN(pnccl##fn, ABI_PICK_OVERLOAD(nccl##fn, ptr_type))));
  ABI_DEVICE_HOST_OVERLOADED(ABI_ADD_OVERLOADED)
#undef ABI_ADD_OVERLOADED
#undef ABI_ADD_FIELD
#undef FN_TYPE
  return t;
}

}  // namespace
}  // namespace conduit_abi

#endif  // CONDUIT_TESTS_ABI_ABI_TABLE_BUILDER_H_
