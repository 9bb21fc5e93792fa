// Prints every record the decoder and router make of wal2json lines, so that an optimisation can
// be checked to change no output byte: run it on the same corpus before and after, and diff.
//
//   route_dump FORMAT [TYPES.tsv [COLUMNS.tsv]] < lines.jsonl
//
// FORMAT is `native`, `debezium`, or either with `+txn` (transaction metadata). Every table is a
// row-change table. TYPES.tsv (psql -At -F$'\t') rows: oid, name, typcategory, typtype, typelem,
// typbasetype, typdelim, typtypmod. COLUMNS.tsv rows: schema, table, column, atttypid, atttypmod,
// attnotnull (t/f), toastable (t/f), position in the primary key (0: none), replica identity, in
// attnum order. benchmarks/golden.sh makes both from a database.
//
// Output: one block per line (its input line number, then each record's topic, key, headers and
// value, or the mapping error); the envelope's processing time (ts_ms/ts_us/ts_ns at the end of
// a row-change value) is printed as `<now>`, since it is the one field that differs between runs.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

namespace {

using walrelay::router::TableSchema;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, '\t')) out.push_back(f);
  if (!line.empty() && line.back() == '\t') out.emplace_back();
  return out;
}

struct FileSchemas : walrelay::router::SchemaProvider {
  std::map<std::string, TableSchema, std::less<>> tables;
  const TableSchema* table(std::string_view schema, std::string_view name, bool) override {
    const auto it = tables.find(std::string(schema) + "." + std::string(name));
    return it == tables.end() ? nullptr : &it->second;
  }
};

// The envelope ends `,"ts_ms":N,"ts_us":N,"ts_ns":N}`: the processing time, printed as `<now>`
// when the three are one reading (ms and µs the ns rounded down), `<now inconsistent>` if not.
std::string mask_now(std::string v) {
  const auto at = v.rfind(",\"ts_ms\":");
  long long ms = 0;
  long long us = 0;
  long long ns = 0;
  if (at != std::string::npos &&
      std::sscanf(v.c_str() + at, R"(,"ts_ms":%lld,"ts_us":%lld,"ts_ns":%lld})", &ms, &us, &ns) ==
          3 &&
      v.find('}', at) == v.size() - 1) {
    const bool ok = ms == ns / 1'000'000 && us == ns / 1000;
    v.replace(at, v.size() - 1 - at, ok ? ",<now>" : ",<now inconsistent>");
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: route_dump native|debezium[+txn] [TYPES.tsv [COLUMNS.tsv]] < lines\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::off);
  std::string format = argv[1];
  walrelay::config::Config cfg;
  if (format.ends_with("+txn")) {
    cfg.events.transaction_metadata = true;
    format.resize(format.size() - 4);
  }
  cfg.events.value_format = format == "debezium" ? walrelay::config::ValueFormat::kDebezium
                                                 : walrelay::config::ValueFormat::kNative;
  cfg.events.operations.truncate = true;
  walrelay::config::TableConfig all;
  all.name = "*.*";
  all.schema_pattern = "*";
  all.table_pattern = "*";
  cfg.tables = {all};

  walrelay::router::TypeRegistry types;
  if (argc > 2) {
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);) {
      const auto f = split_tabs(line);
      if (f.size() < 8) continue;
      walrelay::router::TypeInfo t;
      t.oid = static_cast<std::uint32_t>(std::stoul(f[0]));
      t.name = f[1];
      t.category = f[2].empty() ? 'U' : f[2][0];
      t.kind = f[3].empty() ? 'b' : f[3][0];
      t.element = static_cast<std::uint32_t>(std::stoul(f[4]));
      t.base = static_cast<std::uint32_t>(std::stoul(f[5]));
      t.delimiter = f[6].empty() ? ',' : f[6][0];
      t.base_typmod = std::stoi(f[7]);
      types.add(t);
    }
  }
  FileSchemas schemas;
  if (argc > 3) {
    std::ifstream in(argv[3]);
    std::map<std::string, std::map<int, std::string>> pks;
    for (std::string line; std::getline(in, line);) {
      const auto f = split_tabs(line);
      if (f.size() < 9) continue;
      const std::string name = f[0] + "." + f[1];
      TableSchema& t = schemas.tables[name];
      t.schema = t.root_schema = f[0];
      t.table = t.root_table = f[1];
      t.replica_identity = f[8].empty() ? 'd' : f[8][0];
      t.columns.push_back({f[2], static_cast<std::uint32_t>(std::stoul(f[3])), std::stoi(f[4]),
                           f[5] == "t", f[6] == "t"});
      if (const int pos = std::stoi(f[7]); pos > 0) pks[name][pos] = f[2];
    }
    for (auto& [name, cols] : pks) {
      for (auto& [pos, col] : cols) schemas.tables[name].primary_key.push_back(col);
    }
  }

  walrelay::decoder::Wal2JsonDecoder decoder;
  walrelay::router::EventRouter router({"dump", "dump", "app", "0.1.0", cfg.events}, cfg,
                                       argc > 3 ? &schemas : nullptr, types);
  auto print = [](std::span<const walrelay::Record> recs) {
    for (const auto& r : recs) {
      std::cout << "  topic " << r.topic << " ts " << r.timestamp_ms << "\n  key "
                << (r.key ? std::string(*r.key) : "<null>") << "\n";
      for (const auto& h : r.headers) std::cout << "  header " << h.name << "=" << h.value << "\n";
      std::cout << "  value " << (r.value ? mask_now(std::string(*r.value)) : "<null>") << "\n";
    }
  };
  std::size_t n = 0;
  bool in_txn = false;
  for (std::string line; std::getline(std::cin, line);) {
    ++n;
    std::cout << "line " << n << "\n";
    auto c = decoder.decode(line);
    if (!c) {
      std::cout << "  decode error " << c.error().reason << "\n";
      continue;
    }
    const auto& ch = **c;
    using walrelay::decoder::Action;
    if (ch.action == Action::kBegin) {
      router.begin(ch.xid, ch.lsn,
                   walrelay::router::parse_commit_timestamp(ch.timestamp)
                       .value_or(std::chrono::microseconds{0}));
      in_txn = true;
      continue;
    }
    if (ch.action == Action::kCommit) {
      if (in_txn) print(router.commit(ch.next_lsn));
      in_txn = false;
      continue;
    }
    auto recs = router.route(ch);
    if (!recs) {
      std::cout << "  error " << recs.error().reason << "\n";
      continue;
    }
    print(*recs);
  }
  return 0;
}
