// Repeatable per-event counts of the decode → route path (no timing; the machine is shared):
// heap allocations per event, counted by a replacement operator new, and a fixed number of
// events in measure_events() so that callgrind's instruction count for it divides exactly.
//
//   decode_route_count [SCENARIO [EVENTS]]     (default: every scenario, 20000 events each)
//   benchmarks/callgrind.sh                    (instructions per event under callgrind)
//
// Prints one line per scenario: its name, the records per event and the heap allocations per
// event once warm (the first events grow the reused buffers and are not counted).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "scenarios.hpp"

namespace {

std::atomic<std::uint64_t> g_allocations{0};

}  // namespace

// The replacement pair is malloc/free on both sides; GCC cannot see that through inlining.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace {

// The measured loop: callgrind --toggle-collect=measure_events counts only this.
[[gnu::noinline]] std::size_t measure_events(walrelay::bench::Pipeline& p, const char* line,
                                             std::size_t events) {
  std::size_t records = 0;
  for (std::size_t i = 0; i < events; ++i) records += p.run(line);
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  const std::size_t events = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20000;
  for (const auto& s : walrelay::bench::scenarios()) {
    if (!only.empty() && only != "all" && only != s.name) continue;
    walrelay::bench::Pipeline p(s.value_format);
    for (int i = 0; i < 100; ++i) p.run(s.line);  // warm: buffers grown, rule and caches filled
    const std::uint64_t before = g_allocations.load();
    const std::size_t records = measure_events(p, s.line, events);
    const std::uint64_t allocs = g_allocations.load() - before;
    std::printf("%-26s records/event %.2f  allocations/event %.3f\n", s.name,
                static_cast<double>(records) / static_cast<double>(events),
                static_cast<double>(allocs) / static_cast<double>(events));
  }
  return 0;
}
