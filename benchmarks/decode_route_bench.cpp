// Per-event CPU of the hot path without I/O: wal2json line → Change → Record.
// Run: cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DWALRELAY_BUILD_BENCHMARKS=ON
//      && cmake --build build/bench --target decode_route_bench &&
//      build/bench/benchmarks/decode_route_bench
// The target in the project brief is ≤ 3 µs of walrelay CPU per event end to end.
// BM_Route/<scenario> routes benchmarks/scenarios.hpp's lines with a catalog, in both value
// formats, and reports heap allocations per event (counted by the operator new below).
// Instruction counts, which do not depend on the machine's load: benchmarks/callgrind.sh.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "scenarios.hpp"
#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

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

constexpr const char* kInsert =
    R"({"action":"I","xid":1031,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3D838","schema":"public","table":"invoices","columns":[{"name":"invoice_id","typeoid":20,"value":9007199254740993},{"name":"subscription_id","typeoid":2950,"value":"3f1c2a9e-0000-4000-8000-000000000001"},{"name":"amount","typeoid":1700,"value":12345678901234567890.123456789},{"name":"status","typeoid":25,"value":"open"},{"name":"note","typeoid":25,"value":"a short note with \"quotes\" and unicode \u00e9"}],"pk":[{"name":"invoice_id","typeoid":20}]})";

walrelay::config::TableConfig invoices() {
  walrelay::config::TableConfig t;
  t.name = "public.invoices";
  t.schema_pattern = "public";
  t.table_pattern = "invoices";
  return t;
}

void BM_Decode(benchmark::State& state) {
  walrelay::decoder::Wal2JsonDecoder d;
  for (auto _ : state) {
    auto c = d.decode(kInsert);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decode);

void BM_DecodeAndRoute(benchmark::State& state) {
  walrelay::decoder::Wal2JsonDecoder d;
  walrelay::config::Config cfg;
  cfg.tables = {invoices()};
  walrelay::router::TypeRegistry types;
  walrelay::router::EventRouter r({"bench", "bench", "app", "0", cfg.events}, cfg, nullptr, types);
  r.begin(1031, walrelay::Lsn(0x26B3D938), std::chrono::microseconds{1795997677104367});
  for (auto _ : state) {
    auto c = d.decode(kInsert);
    auto recs = r.route(**c);
    benchmark::DoNotOptimize(recs);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeAndRoute);

void BM_Route(benchmark::State& state, const walrelay::bench::Scenario* s) {
  walrelay::bench::Pipeline p(s->value_format);
  for (int i = 0; i < 100; ++i) p.run(s->line);
  const std::uint64_t before = g_allocations.load();
  for (auto _ : state) {
    benchmark::DoNotOptimize(p.run(s->line));
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["allocs/event"] =
      static_cast<double>(g_allocations.load() - before) / static_cast<double>(state.iterations());
}

[[maybe_unused]] const bool registered = [] {
  for (const auto& s : walrelay::bench::scenarios()) {
    benchmark::RegisterBenchmark((std::string("BM_Route/") + s.name).c_str(), BM_Route, &s);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
