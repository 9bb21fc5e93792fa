#pragma once

namespace walrelay {

/// Tunes glibc malloc for walrelay's allocation pattern: every event is a burst of short-lived
/// heap blocks (librdkafka's copy of each record, freed when its delivery report is served;
/// libpq's result blocks), so with glibc's defaults the top of the heap is trimmed and faulted in
/// again all the time (page faults and malloc_consolidate were ~8 % of a snapshot's CPU,
/// benchmarks/RESULTS.md). Sets M_TRIM_THRESHOLD to 64 MiB, M_TOP_PAD to 8 MiB and M_MMAP_THRESHOLD
/// to 4 MiB (mallopt(3)). Does nothing when the operator set GLIBC_TUNABLES (their choice wins).
/// Call once, first thing in main, before any thread starts. Memory stays bounded: the heap holds
/// at most what the in-flight bounds let it grow to, and release_free_memory() gives it back when
/// idle.
void tune_allocator();

/// Returns free heap memory to the kernel (malloc_trim(3) with pad 0), so the RSS falls back
/// after a burst (a snapshot, a large transaction). Cost: a walk of the heaps, about a
/// millisecond per 100 MB of free heap; call it when nothing is in flight, not per event.
void release_free_memory();

}  // namespace walrelay
