// GpuAccess: what the double's stream threads do to device memory, kept out of
// ThreadSanitizer's view.
//
// The stream threads stand for the GPU. The order of their reads and writes of device
// memory comes from stream semantics, and often through another process: conduitd's
// communicator stream writes a program's buffer and then its done word, the program's
// stream waits for that word and writes its ready word, and another stream of conduitd
// (a connection's point-to-point stream) waits for the ready word and writes the same
// buffer. On a GPU that order holds (stream memory operations carry a memory barrier);
// TSan sees only two threads of one process writing one address with nothing between
// them, and would halt the daemon. So device memory accesses are ignored, and only those:
// pinned and pageable host memory, which conduitd's own threads read and write, stay
// checked, and every test checks the data, so a real ordering mistake still fails.
#ifndef CONDUIT_TESTS_CUDA_DOUBLE_GPU_ACCESS_H_
#define CONDUIT_TESTS_CUDA_DOUBLE_GPU_ACCESS_H_

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace cuda_double {

class GpuAccess {
 public:
  // Ignore this thread's reads while in scope when `reads` (device memory is read), its
  // writes when `writes`.
  GpuAccess(bool reads, bool writes) : reads_(reads), writes_(writes) {
#if defined(__SANITIZE_THREAD__)
    if (reads_) AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    if (writes_) AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  }
  ~GpuAccess() {
#if defined(__SANITIZE_THREAD__)
    if (writes_) AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    if (reads_) AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
  }
  GpuAccess(const GpuAccess&) = delete;
  GpuAccess& operator=(const GpuAccess&) = delete;

 private:
  [[maybe_unused]] const bool reads_;  // used only under ThreadSanitizer
  [[maybe_unused]] const bool writes_;
};

}  // namespace cuda_double

#endif  // CONDUIT_TESTS_CUDA_DOUBLE_GPU_ACCESS_H_
