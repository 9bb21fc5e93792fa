// Per-event CPU of the hot path without I/O: wal2json line → Change → Record.
// Run: cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DWALRELAY_BUILD_BENCHMARKS=ON
//      && cmake --build build/bench --target decode_route_bench &&
//      build/bench/benchmarks/decode_route_bench
// The target in the project brief is ≤ 3 µs of walrelay CPU per event end to end.
#include <benchmark/benchmark.h>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

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

}  // namespace

BENCHMARK_MAIN();
