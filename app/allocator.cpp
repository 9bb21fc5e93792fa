#include "walrelay/app/allocator.hpp"

#include <malloc.h>

#include <cstdlib>

namespace walrelay {

void tune_allocator() {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  constexpr int kTrimThreshold = 64 << 20;  // bytes free at the top before the heap is trimmed
  // Setting it also stops glibc raising the mmap threshold by itself (mallopt(3)):
  // fix it where its dynamic rule would end up, so libpq's large result blocks stay on the heap.
  constexpr int kMmapThreshold = 4 << 20;
  (void)mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  (void)mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
}

void release_free_memory() {
  (void)malloc_trim(0);
}

}  // namespace walrelay
