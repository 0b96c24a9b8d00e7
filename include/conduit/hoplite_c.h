/* C ABI of libhoplite (for the Python package and other languages). Every call returns a
 * hoplite::Code value (0 = ok) and, on error, writes a NUL-terminated message into
 * err[0, errlen). Ids are byte strings of 1..63 bytes. */
#ifndef CONDUIT_HOPLITE_C_H_
#define CONDUIT_HOPLITE_C_H_

#include <stddef.h>
#include <stdint.h>

#include "hoplite_export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hoplite_client hoplite_client;
typedef struct hoplite_view hoplite_view;
/* Returns where Get copies an object of `size` bytes (NULL only for size 0). */
typedef void* (*hoplite_alloc_fn)(void* ctx, uint64_t size);

HOPLITE_API int hoplite_connect(const char* socket_path, hoplite_client** out, char* err, size_t errlen);
HOPLITE_API void hoplite_close(hoplite_client* c);
/* Object access (who may read besides the owner and operators), as hoplite::Access. */
enum { HOPLITE_ACCESS_DEFAULT = 0, HOPLITE_ACCESS_OWNER = 1, HOPLITE_ACCESS_GROUP = 2, HOPLITE_ACCESS_WORLD = 3 };

/* Put with the daemon's default access. */
HOPLITE_API int hoplite_put(hoplite_client* c, const char* id, size_t idlen, const void* data, uint64_t size, char* err,
                size_t errlen);
HOPLITE_API int hoplite_put_access(hoplite_client* c, const char* id, size_t idlen, const void* data, uint64_t size, int access,
                       char* err, size_t errlen);
HOPLITE_API int hoplite_get(hoplite_client* c, const char* id, size_t idlen, int timeout_ms, hoplite_alloc_fn alloc, void* ctx,
                char* err, size_t errlen);
/* Zero-copy read-only view; valid until hoplite_view_release. */
HOPLITE_API int hoplite_get_readonly(hoplite_client* c, const char* id, size_t idlen, int timeout_ms, hoplite_view** view,
                         const void** data, uint64_t* size, char* err, size_t errlen);
HOPLITE_API void hoplite_view_release(hoplite_view* v);
HOPLITE_API int hoplite_delete(hoplite_client* c, const char* id, size_t idlen, char* err, size_t errlen);
/* used: room for n indices; *nused gets how many were written. */
HOPLITE_API int hoplite_reduce(hoplite_client* c, const char* target, size_t targetlen, const char* const* ids,
                   const size_t* idlens, size_t n, size_t num_objects, int op, int dtype, int timeout_ms,
                   uint32_t* used, size_t* nused, char* err, size_t errlen);
/* The same with the target's access (HOPLITE_ACCESS_*). */
HOPLITE_API int hoplite_reduce_access(hoplite_client* c, const char* target, size_t targetlen, const char* const* ids,
                          const size_t* idlens, size_t n, size_t num_objects, int op, int dtype, int timeout_ms,
                          int access, uint32_t* used, size_t* nused, char* err, size_t errlen);
/* ready: room for n indices. */
HOPLITE_API int hoplite_wait(hoplite_client* c, const char* const* ids, const size_t* idlens, size_t n, size_t num_ready,
                 int timeout_ms, uint32_t* ready, size_t* nready, char* err, size_t errlen);
/* The daemon's object state as JSON; *len gets the full length (may exceed cap). */
HOPLITE_API int hoplite_state(hoplite_client* c, char* buf, size_t cap, size_t* len, char* err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* CONDUIT_HOPLITE_C_H_ */
