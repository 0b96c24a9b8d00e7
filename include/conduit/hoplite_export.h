/* Which symbols libhoplite exports. The library is built with hidden visibility (and keeps
 * the daemon code it links statically to itself), so programs see exactly the declarations
 * marked HOPLITE_API: the classes of hoplite.h and the functions of hoplite_c.h. */
#ifndef CONDUIT_HOPLITE_EXPORT_H_
#define CONDUIT_HOPLITE_EXPORT_H_

#define HOPLITE_API __attribute__((visibility("default")))

#endif /* CONDUIT_HOPLITE_EXPORT_H_ */
