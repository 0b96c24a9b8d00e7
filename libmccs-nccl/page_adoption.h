// Page adoption: turning the pages of a program's own host buffer (malloc'd, not from
// ncclMemAlloc) into shared memory that conduitd can map, in place, so that collectives on
// it run in the buffer itself as they do in ncclMemAlloc'd regions (host_regions.h) instead
// of through two staging copies (docs/design.md, "Copies per payload byte").
//
// The buffer's pages wholly inside it (the interior) are copied into a sealed memfd and the
// memfd is mapped over them (MAP_FIXED | MAP_SHARED): the program keeps its addresses and
// its bytes, now shared with the daemon. The pages at either end usually hold other data of
// the program (malloc's headers, a neighbouring object) that another thread may write at
// any time, so they are never remapped; the memfd holds a copy of them (its byte 0 is the
// first page's start), through which an op's bytes there are copied in before the daemon
// reads them and out after it wrote them (CopyEdgesIn/Out): at most two pages per buffer.
//
// What makes it safe, and its limits:
//  * only private, anonymous, readable and writable memory is adopted (the heap, or an
//    anonymous mapping), never a file mapping, shared memory, the stack or read-only data:
//    the kernel says what each page range is (PROCMAP_QUERY on /proc/self/maps, Linux
//    6.11 and later; without it nothing is adopted);
//  * whether the pages are still the memfd's is asked of the kernel before every use
//    (StillAdopted): a buffer freed and another allocated at its address is noticed;
//  * a child the program forks gets private copies of adopted pages (ReprivatizePages,
//    from a pthread_atfork handler registered before the first adoption), as it would
//    have of the originals; of those still the memfd's only, not of memory the program
//    unmapped or mapped there since the last look;
//  * a buffer that stopped being adopted in part (the heap trimmed above part of it, part
//    unmapped, shrunk or mprotect'ed) leaves the pages that are still the memfd's private
//    to the program again (UnsharePagesLeft): a private mapping of the memfd, which nothing
//    writes once its region is dropped, so that a child forked later gets its own copy;
//  * the remap copies the interior while the program is inside an NCCL call on the buffer,
//    which by NCCL's rules no thread writes meanwhile.
#ifndef CONDUIT_LIBMCCS_NCCL_PAGE_ADOPTION_H_
#define CONDUIT_LIBMCCS_NCCL_PAGE_ADOPTION_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/fd_io.h"
#include "common/shm_segment.h"
#include "common/status.h"

namespace conduit {

struct AdoptedPages {
  uintptr_t base = 0;            // program address of the memfd's byte 0 (a page start)
  uintptr_t interior_begin = 0;  // [interior_begin, interior_end): the program's pages that are the memfd's
  uintptr_t interior_end = 0;
  uint64_t inode = 0;            // the memfd's, to recognise its mapping
  ShmSegment copy;               // the whole memfd mapped here (edges are copied through it)
  UniqueFd fd;

  size_t size() const { return copy.size(); }
  uintptr_t end() const { return base + copy.size(); }
};

// Whether this kernel answers PROCMAP_QUERY (asked once). The calls below are not
// thread-safe: their caller serializes them (host_regions.cc, under its table's lock).
bool PageAdoptionSupported();

// Adopts the pages of [p, p + bytes) into `out`, a fresh AdoptedPages. Fails (the program's
// memory as it was; `out` to be dropped) where the interior would be empty or the memory is
// not private anonymous read-write memory. Pages adopted before from a memfd whose inode is
// in `own` count as the program's: a larger buffer around them supersedes them (a program
// that runs on a growing prefix of one allocation, as benchmarks do). So do pages a dropped
// region left private (UnsharePagesLeft).
Status AdoptPages(const void* p, size_t bytes, AdoptedPages* out, const std::vector<uint64_t>& own = {});

// Whether the interior is still mapped from the memfd, as AdoptPages left it.
bool StillAdopted(const AdoptedPages& pages);

// Copies the bytes of [p, p + bytes) that lie outside the interior: from the program into
// the memfd (In), or from the memfd into the program (Out). [p, p + bytes) must lie within
// [base, end()).
void CopyEdgesIn(const AdoptedPages& pages, const void* p, size_t bytes);
void CopyEdgesOut(const AdoptedPages& pages, void* p, size_t bytes);

// Gives the ranges of the interior still mapped from the memfd (as AdoptPages mapped them;
// the kernel is asked, range by range) private anonymous pages holding the same bytes and
// protection: in a forked child (with only system calls and memcpy, all the child of a
// threaded parent may use), and after a failed adoption. Copied, then moved in place: only
// where no other thread writes them.
void ReprivatizePages(const AdoptedPages& pages);

// For a region being dropped in a process that runs on (another thread may write any of
// these pages): the ranges of the interior still mapped from the memfd become private
// mappings of it, in one mmap each (no write is lost), that no other mapping writes once
// the daemon released the memfd. Nothing where the interior is unmapped or mapped over.
void UnsharePagesLeft(const AdoptedPages& pages);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_PAGE_ADOPTION_H_
