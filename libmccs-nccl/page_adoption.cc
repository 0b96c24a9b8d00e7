#include "page_adoption.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace conduit {
namespace {

// PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h): one VMA of /proc/PID/maps by
// address, without parsing the text. Declared here because the C library's headers on
// older build hosts predate it; the values are the kernel's ABI.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = 0xC0686611;  // _IOWR('f', 17, struct procmap_query)
constexpr uint64_t kVmaReadable = 0x1, kVmaWritable = 0x2, kVmaExecutable = 0x4, kVmaShared = 0x8;
constexpr uint64_t kQueryCoveringOrNext = 0x10;  // PROCMAP_QUERY_COVERING_OR_NEXT_VMA

// The VMA of the maps file `fd` that holds `addr` (with kQueryCoveringOrNext: or else the
// first one above it), with its name (empty for an unnamed anonymous mapping). Without a
// name, only system calls: a forked child may call it.
bool QueryVmaOf(int fd, uintptr_t addr, ProcmapQuery* q, std::string* name, uint64_t flags = 0) {
  char buffer[256];
  memset(q, 0, sizeof(*q));
  q->size = sizeof(*q);
  q->query_flags = flags;
  q->query_addr = addr;
  q->vma_name_addr = reinterpret_cast<uint64_t>(buffer);
  q->vma_name_size = sizeof(buffer);
  if (ioctl(fd, kProcmapQuery, q) != 0) return false;
  if (name != nullptr) name->assign(buffer, q->vma_name_size > 0 ? strnlen(buffer, q->vma_name_size) : 0);
  return true;
}

// The same on this process's maps file, kept open and reopened after a fork (an inherited
// descriptor describes the parent: /proc/self is resolved when the file is opened). Not
// locked: its callers are serialized (host_regions.cc calls it under its table's lock,
// which a fork also takes). Without a name, only system calls, as for QueryVmaOf.
int g_maps_fd = -1;
pid_t g_maps_pid = 0;

bool QueryVma(uintptr_t addr, ProcmapQuery* q, std::string* name, uint64_t flags = 0) {
  const pid_t pid = getpid();
  if (g_maps_fd < 0 || g_maps_pid != pid) {
    if (g_maps_fd >= 0) close(g_maps_fd);
    g_maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    g_maps_pid = pid;
    if (g_maps_fd < 0) return false;
  }
  return QueryVmaOf(g_maps_fd, addr, q, name, flags);
}

uintptr_t PageBytes() { return static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)); }

// How a memfd of AdoptPages's is named in the maps file.
constexpr char kAdoptedName[] = "conduit-adopted";
constexpr char kAdoptedMapsName[] = "/memfd:conduit-adopted (deleted)";

// Whether [begin, end) is private anonymous read-write memory: the heap, an anonymous
// mapping (named or not), nothing a file, another process or the stack shares or grows;
// or pages adopted before, from a memfd whose inode is in `own`; or pages a dropped region
// left private (UnsharePagesLeft: a private mapping of a memfd of ours that nothing writes
// any more, which is what private anonymous memory is).
Status CheckPrivateAnonymous(uintptr_t begin, uintptr_t end, const std::vector<uint64_t>& own = {}) {
  constexpr uint64_t kReadWrite = kVmaReadable | kVmaWritable;
  for (uintptr_t at = begin; at < end;) {
    ProcmapQuery q;
    std::string name;
    if (!QueryVma(at, &q, &name)) return InvalidUsage("no mapping at %#lx", static_cast<unsigned long>(at));
    const bool own_shared = q.inode != 0 && std::find(own.begin(), own.end(), q.inode) != own.end() &&
                            (q.vma_flags & (kReadWrite | kVmaShared)) == (kReadWrite | kVmaShared);
    const bool left_private = name == kAdoptedMapsName && (q.vma_flags & (kReadWrite | kVmaShared)) == kReadWrite;
    if (own_shared || left_private) {
      at = q.vma_end;
      continue;
    }
    const bool anonymous = q.inode == 0 && q.dev_major == 0 && q.dev_minor == 0 &&
                           (name.empty() || name == "[heap]" || name.rfind("[anon:", 0) == 0);
    if (!anonymous || (q.vma_flags & (kVmaReadable | kVmaWritable)) != (kVmaReadable | kVmaWritable) ||
        (q.vma_flags & kVmaShared) != 0 || q.vma_page_size != PageBytes()) {
      return InvalidUsage("the memory at %#lx is not private anonymous read-write memory (%s)",
                          static_cast<unsigned long>(at), name.empty() ? "unnamed" : name.c_str());
    }
    at = q.vma_end;
  }
  return Status::Ok();
}

// Copies [from, to) of the program, clipped to the part outside the interior, between the
// program (`dir_in`: into the memfd) and the memfd.
void CopyOutsideInterior(const AdoptedPages& pages, uintptr_t from, uintptr_t to, bool dir_in) {
  auto copy = [&](uintptr_t a, uintptr_t b) {
    if (a >= b) return;
    uint8_t* shadow = pages.copy.data() + (a - pages.base);
    if (dir_in) {
      memcpy(shadow, reinterpret_cast<const void*>(a), b - a);
    } else {
      memcpy(reinterpret_cast<void*>(a), shadow, b - a);
    }
  };
  copy(std::max(from, pages.base), std::min(to, pages.interior_begin));
  copy(std::max(from, pages.interior_end), std::min(to, pages.end()));
}

// The protection of a VMA, from its PROCMAP_QUERY flags.
int Protection(uint64_t vma_flags) {
  return ((vma_flags & kVmaReadable) != 0 ? PROT_READ : 0) | ((vma_flags & kVmaWritable) != 0 ? PROT_WRITE : 0) |
         ((vma_flags & kVmaExecutable) != 0 ? PROT_EXEC : 0);
}

// Calls fn(begin, end, prot) for each range of the interior still mapped from the memfd at
// the offset AdoptPages mapped it with: all of it while StillAdopted, what is left of it
// once the program unmapped, mapped over, mprotect'ed or shrank part of it. fn may remap
// its range. Only system calls: a forked child may call it.
template <typename Fn>
void ForEachRangeStillMapped(const AdoptedPages& pages, Fn fn) {
  for (uintptr_t at = pages.interior_begin; at < pages.interior_end;) {
    ProcmapQuery q;
    if (!QueryVma(at, &q, nullptr, kQueryCoveringOrNext) || q.vma_start >= pages.interior_end) return;
    if (q.inode == pages.inode && (q.vma_flags & kVmaShared) != 0 && q.vma_offset == q.vma_start - pages.base) {
      fn(std::max<uintptr_t>(q.vma_start, at), std::min<uintptr_t>(q.vma_end, pages.interior_end),
         Protection(q.vma_flags));
    }
    at = q.vma_end;
  }
}

// Gives [begin, end) private anonymous pages holding its bytes, with protection `prot`:
// copied, then moved over it. A write to the range between the two is lost: only for a
// range no other thread writes (a forked child's, a buffer inside its NCCL call).
void CopyToPrivatePages(uintptr_t begin, uintptr_t end, int prot) {
  const size_t length = end - begin;
  void* fresh = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh == MAP_FAILED) return;  // the pages stay shared
  void* at = reinterpret_cast<void*>(begin);
  // Pages the program made unreadable (a guard) are read all the same: they are replaced.
  if ((prot & PROT_READ) == 0 && mprotect(at, length, prot | PROT_READ) != 0) {
    munmap(fresh, length);
    return;
  }
  memcpy(fresh, at, length);
  if (mprotect(fresh, length, prot) != 0 ||
      mremap(fresh, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) {
    munmap(fresh, length);
    if ((prot & PROT_READ) == 0) mprotect(at, length, prot);
  }
}

}  // namespace

bool PageAdoptionSupported() {
  static const bool supported = [] {
    const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ProcmapQuery q;
    static int probe = 0;
    const bool answered = QueryVmaOf(fd, reinterpret_cast<uintptr_t>(&probe), &q, nullptr);
    close(fd);
    return answered;
  }();
  return supported;
}

Status AdoptPages(const void* p, size_t bytes, AdoptedPages* out, const std::vector<uint64_t>& own) {
  if (!PageAdoptionSupported()) return InvalidUsage("the kernel does not answer PROCMAP_QUERY (Linux 6.11)");
  const uintptr_t page = PageBytes();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  if (bytes == 0 || begin > UINTPTR_MAX - bytes - page) return InvalidArgument("no buffer to adopt");
  const uintptr_t end = begin + bytes;
  const uintptr_t base = begin & ~(page - 1), limit = (end + page - 1) & ~(page - 1);
  const uintptr_t interior_begin = (begin + page - 1) & ~(page - 1), interior_end = end & ~(page - 1);
  if (interior_begin >= interior_end) return InvalidArgument("the buffer holds no whole page");
  CONDUIT_RETURN_IF_ERROR(CheckPrivateAnonymous(interior_begin, interior_end, own));

  AdoptedPages& pages = *out;  // fresh (ShmSegment does not move); the caller drops it on failure
  CONDUIT_RETURN_IF_ERROR(pages.copy.Create(kAdoptedName, limit - base, &pages.fd));
  struct stat st;
  if (fstat(pages.fd.get(), &st) != 0) return SystemError("fstat of an adopted buffer's memfd: %s", strerror(errno));
  pages.base = base;
  pages.interior_begin = interior_begin;
  pages.interior_end = interior_end;
  pages.inode = st.st_ino;
  // The buffer's own bytes only: the rest of its first and last page belongs to other
  // objects (and to no op until one names it, whose edge bytes are copied then).
  memcpy(pages.copy.data() + (begin - base), p, bytes);
  const size_t length = interior_end - interior_begin;
  void* at = mmap(reinterpret_cast<void*>(interior_begin), length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                  pages.fd.get(), static_cast<off_t>(interior_begin - base));
  if (at == MAP_FAILED) {
    const int err = errno;
    // A kernel may have unmapped the old pages before failing: give them back their bytes.
    if (!CheckPrivateAnonymous(interior_begin, interior_end, own).ok()) {
      void* back = mmap(reinterpret_cast<void*>(interior_begin), length, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (back != MAP_FAILED) memcpy(back, pages.copy.data() + (interior_begin - base), length);
    }
    return SystemError("mapping an adopted buffer's pages: %s", strerror(err));
  }
  if (!StillAdopted(pages)) {
    // Not what was mapped: put private pages back rather than leave an unknown state.
    ReprivatizePages(pages);
    return SystemError("an adopted buffer's pages are not the memfd's after mapping it");
  }
  return Status::Ok();
}

bool StillAdopted(const AdoptedPages& pages) {
  ProcmapQuery q;
  if (!QueryVma(pages.interior_begin, &q, nullptr)) return false;
  return q.inode == pages.inode && (q.vma_flags & kVmaShared) != 0 && q.vma_start <= pages.interior_begin &&
         q.vma_end >= pages.interior_end &&
         q.vma_offset + (pages.interior_begin - q.vma_start) == pages.interior_begin - pages.base;
}

void CopyEdgesIn(const AdoptedPages& pages, const void* p, size_t bytes) {
  const uintptr_t from = reinterpret_cast<uintptr_t>(p);
  CopyOutsideInterior(pages, from, from + bytes, /*dir_in=*/true);
}

void CopyEdgesOut(const AdoptedPages& pages, void* p, size_t bytes) {
  const uintptr_t from = reinterpret_cast<uintptr_t>(p);
  CopyOutsideInterior(pages, from, from + bytes, /*dir_in=*/false);
}

void ReprivatizePages(const AdoptedPages& pages) { ForEachRangeStillMapped(pages, CopyToPrivatePages); }

void UnsharePagesLeft(const AdoptedPages& pages) {
  ForEachRangeStillMapped(pages, [&](uintptr_t begin, uintptr_t end, int prot) {
    // A private mapping of the same memfd pages, in one step: what any thread wrote there
    // is in them, and what it writes from now on is its own (copy on write). Failing, the
    // pages stay shared, as before.
    mmap(reinterpret_cast<void*>(begin), end - begin, prot, MAP_PRIVATE | MAP_FIXED, pages.fd.get(),
         static_cast<off_t>(begin - pages.base));
  });
}

}  // namespace conduit
