// The server and slot rules of preflight.hpp, which `run` and `check` both apply before streaming.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "walrelay/connector/preflight.hpp"

namespace walrelay {
namespace {

using namespace std::chrono_literals;

config::Config config_with(bool create_slot, bool allow_reset) {
  config::Config cfg;
  cfg.source.slot = "s";
  cfg.source.create_slot = create_slot;
  cfg.source.allow_slot_reset = allow_reset;
  return cfg;
}

SlotRecord record(std::string system, std::uint32_t timeline, Lsn confirmed) {
  SlotRecord r;
  r.system_id = std::move(system);
  r.timeline = timeline;
  r.slot = "s";
  r.confirmed = confirmed;
  return r;
}

pg::SystemInfo server(std::string system, std::uint32_t timeline) {
  pg::SystemInfo s;
  s.system_id = std::move(system);
  s.timeline = timeline;
  s.dbname = "app";
  return s;
}

TEST(PreflightRules, WalLevelMustBeLogical) {
  EXPECT_FALSE(check_wal_level("logical"));
  const auto refused = check_wal_level("replica");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ExitCode::kRuntimeError);
  EXPECT_NE(refused->message.find("wal_level is 'replica'"), std::string::npos);
}

TEST(PreflightRules, StatusIntervalStaysWellBelowWalSenderTimeout) {
  EXPECT_EQ(parse_pg_duration("1min"), 60s);
  EXPECT_EQ(parse_pg_duration("500ms"), 500ms);
  EXPECT_EQ(parse_pg_duration("0"), 0ms);
  EXPECT_EQ(parse_pg_duration("2h"), 2h);
  auto kept = status_interval_for(10s, 60s);
  EXPECT_EQ(kept.interval, 10s);
  EXPECT_TRUE(kept.warning.empty());
  EXPECT_EQ(status_interval_for(10s, 0ms).interval, 10s);  // timeout off
  auto shortened = status_interval_for(10s, 15s);
  EXPECT_EQ(shortened.interval, 5s);
  EXPECT_NE(shortened.warning.find("every 5000 ms"), std::string::npos) << shortened.warning;
  EXPECT_EQ(status_interval_for(10s, 150ms).interval, 100ms);  // never below 100 ms
}

TEST(PreflightRules, TheSlotRecordMustFitTheServer) {
  const Lsn confirmed = Lsn::parse("0/3000000").value();
  const auto rec = record("111", 1, confirmed);
  EXPECT_FALSE(check_slot_record(std::nullopt, false, server("222", 1), std::nullopt));
  EXPECT_FALSE(check_slot_record(rec, false, server("111", 1), std::nullopt));
  // Another cluster.
  auto other = check_slot_record(rec, false, server("222", 1), std::nullopt);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->code, ExitCode::kSlotLost);
  EXPECT_NE(other->message.find("Last safe LSN: 0/3000000"), std::string::npos);
  EXPECT_FALSE(check_slot_record(rec, true, server("222", 1), std::nullopt));  // reset allowed
  // A failover: the old timeline forked after what walrelay confirmed (fine), before it (lost),
  // or is not in the new timeline's history (lost).
  EXPECT_FALSE(check_slot_record(rec, false, server("111", 2), Lsn::parse("0/4000000").value()));
  auto past = check_slot_record(rec, false, server("111", 2), Lsn::parse("0/2000000").value());
  ASSERT_TRUE(past);
  EXPECT_EQ(past->code, ExitCode::kSlotLost);
  EXPECT_NE(past->message.find("Last safe LSN: 0/2000000"), std::string::npos);
  auto unknown = check_slot_record(rec, false, server("111", 2), std::nullopt);
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->message.find("is not in its history"), std::string::npos);
}

TEST(PreflightRules, TheSlotMustBeUsable) {
  const auto rec = record("111", 1, Lsn::parse("0/3000000").value());
  // Missing: created, unless walrelay streamed it before or may not create it.
  EXPECT_FALSE(check_slot(std::nullopt, std::nullopt, false, config_with(true, false), "app"));
  auto gone = check_slot(std::nullopt, rec, false, config_with(true, false), "app");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->code, ExitCode::kSlotLost);
  EXPECT_FALSE(check_slot(std::nullopt, rec, true, config_with(true, true), "app"));
  auto no_create = check_slot(std::nullopt, std::nullopt, false, config_with(false, false), "app");
  ASSERT_TRUE(no_create);
  EXPECT_EQ(no_create->code, ExitCode::kRuntimeError);
  // Present: a logical wal2json slot of this database that is not lost.
  pg::SlotInfo s;
  s.plugin = "wal2json";
  s.slot_type = "logical";
  s.database = "app";
  s.wal_status = "reserved";
  EXPECT_FALSE(check_slot(s, rec, false, config_with(true, false), "app"));
  auto other_db = check_slot(s, rec, false, config_with(true, false), "billing");
  ASSERT_TRUE(other_db);
  EXPECT_EQ(other_db->code, ExitCode::kRuntimeError);
  s.plugin = "pgoutput";
  ASSERT_TRUE(check_slot(s, rec, false, config_with(true, false), "app"));
  s.plugin = "wal2json";
  s.wal_status = "lost";
  auto lost = check_slot(s, rec, false, config_with(true, false), "app");
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->code, ExitCode::kSlotLost);
}

TEST(PreflightRules, AllowSlotResetCountsOnce) {
  auto rec = record("111", 1, Lsn{});
  EXPECT_TRUE(slot_reset_allowed(config_with(true, true), std::nullopt));
  EXPECT_TRUE(slot_reset_allowed(config_with(true, true), rec));
  rec.reset_used = true;
  EXPECT_FALSE(slot_reset_allowed(config_with(true, true), rec));
  EXPECT_FALSE(slot_reset_allowed(config_with(true, false), rec));
}

}  // namespace
}  // namespace walrelay

namespace walrelay {
namespace {

// Table shapes given by the test.
struct Shapes : router::SchemaProvider {
  std::map<std::string, router::TableSchema> tables;
  const router::TableSchema* table(std::string_view schema, std::string_view name,
                                   bool /*refresh*/) override {
    auto it = tables.find(std::string(schema) + "." + std::string(name));
    return it == tables.end() ? nullptr : &it->second;
  }
  void add(const std::string& schema, const std::string& name,
           const std::vector<std::string>& columns) {
    router::TableSchema& t = tables[schema + "." + name];
    t.schema = t.root_schema = schema;
    t.table = t.root_table = name;
    for (const auto& c : columns) t.columns.push_back(router::ColumnInfo{c, 25, -1, false, true});
    t.primary_key = {columns.front()};
  }
};

config::TableConfig entry(const std::string& schema, const std::string& table) {
  config::TableConfig t;
  t.name = schema + "." + table;
  t.schema_pattern = schema;
  t.table_pattern = table;
  return t;
}

MatchedTable matched(std::size_t at, const std::string& schema, const std::string& table) {
  MatchedTable m;
  m.entry = at;
  m.schema = schema;
  m.table = table;
  m.has_primary_key = true;
  m.primary_key = {"id"};
  return m;
}

// The refusals `run` and `check` print for key_columns and mask_columns naming a column the
// table does not have (the refusal is the first: what `run` exits 2 with).
std::vector<std::string> refusals(const config::Config& cfg, Shapes& shapes,
                                  const std::vector<MatchedTable>& tables) {
  router::TypeRegistry types;
  router::EventRouter r(router::RouterSettings{"c", "c", "app", "", cfg.events}, cfg, &shapes,
                        types);
  const TablePreflight p = preflight_tables(tables, {}, {}, r, cfg);
  std::vector<std::string> out;
  for (const auto& f : p.general) {
    if (f.refused) out.push_back(f.message);
  }
  for (const auto& v : p.tables) {
    for (const auto& f : v.findings) {
      if (f.refused) out.push_back(f.message);
    }
  }
  return out;
}

TEST(PreflightRules, KeyAndMaskColumnsMustExistInTheTable) {
  Shapes shapes;
  shapes.add("shop", "customers", {"id", "email"});
  shapes.add("shop", "orders", {"id", "total"});
  const std::vector<MatchedTable> customers = {matched(0, "shop", "customers")};
  {
    config::Config cfg;
    cfg.tables = {entry("shop", "customers")};
    EXPECT_TRUE(refusals(cfg, shapes, customers).empty());
    cfg.tables[0].key_columns = {"mail"};
    const auto r = refusals(cfg, shapes, customers);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_NE(r[0].find("table shop.customers has no column mail named in its key_columns [mail]"),
              std::string::npos)
        << r[0];
    cfg.tables[0].key_columns = {"email"};
    EXPECT_TRUE(refusals(cfg, shapes, customers).empty());
  }
  {
    config::Config cfg;
    cfg.tables = {entry("shop", "customers")};
    cfg.tables[0].mask_columns = {"email", "emial"};
    const auto r = refusals(cfg, shapes, customers);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_NE(r[0].find("table shop.customers has no column emial named in its mask_columns"),
              std::string::npos)
        << r[0];
  }
  // A glob entry: a mask column some of its tables have is fine; one none has is refused.
  const std::vector<MatchedTable> both = {matched(0, "shop", "customers"),
                                          matched(0, "shop", "orders")};
  config::Config cfg;
  cfg.tables = {entry("shop", "*")};
  cfg.tables[0].mask_columns = {"email"};
  EXPECT_TRUE(refusals(cfg, shapes, both).empty());
  cfg.tables[0].mask_columns = {"email", "emial"};
  const auto r = refusals(cfg, shapes, both);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].find("tables entry 'shop.*' names emial in its mask_columns"), std::string::npos)
      << r[0];
  // key_columns of a glob: every table must have them.
  cfg.tables[0].mask_columns.clear();
  cfg.tables[0].key_columns = {"email"};
  const auto k = refusals(cfg, shapes, both);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_NE(k[0].find("table shop.orders has no column email"), std::string::npos) << k[0];
}

// The warnings (not refusals) of the table rules, in order.
std::vector<std::string> warnings(const config::Config& cfg, Shapes& shapes,
                                  const std::vector<MatchedTable>& tables) {
  router::TypeRegistry types;
  router::EventRouter r(router::RouterSettings{"c", "c", "app", "", cfg.events}, cfg, &shapes,
                        types);
  const TablePreflight p = preflight_tables(tables, {}, {}, r, cfg);
  std::vector<std::string> out;
  for (const auto& v : p.tables) {
    for (const auto& f : v.findings) {
      if (!f.refused) out.push_back(f.message);
    }
  }
  return out;
}

// Issue 25 item 8: `key_columns: [serial]` on a nullable column gave three rows one Kafka key
// without a word. `run` and `check` warn, naming the table and the column.
TEST(PreflightRules, NullableKeyColumnsSharingOneKeyAreWarnedAbout) {
  Shapes shapes;
  shapes.add("shop", "devices", {"id", "serial", "site", "model"});
  router::TableSchema& devices = shapes.tables["shop.devices"];
  devices.columns[0].not_null = true;
  devices.columns[2].not_null = true;
  const std::vector<MatchedTable> tables = {matched(0, "shop", "devices")};
  const auto nullable_warnings = [&](std::vector<std::string> key) {
    config::Config cfg;
    cfg.tables = {entry("shop", "devices")};
    cfg.tables[0].key_columns = std::move(key);
    std::vector<std::string> out;
    for (auto& w : warnings(cfg, shapes, tables)) {
      if (w.find("allow") != std::string::npos) out.push_back(std::move(w));
    }
    EXPECT_TRUE(refusals(cfg, shapes, tables).empty());
    return out;
  };
  {
    const auto w = nullable_warnings({"serial"});
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0],
              "table shop.devices keys its events by key_columns [serial], but serial allows NULL "
              "and no unique index on NOT NULL columns lies within them: rows whose key columns "
              "are NULL share one Kafka key (compaction keeps only one of them). Make serial NOT "
              "NULL, or key by columns that identify a row");
  }
  {
    const auto w = nullable_warnings({"site", "serial", "model"});
    ASSERT_EQ(w.size(), 1u);
    EXPECT_NE(w[0].find("but serial, model allow NULL"), std::string::npos) << w[0];
  }
  EXPECT_TRUE(nullable_warnings({"site"}).empty());  // NOT NULL (not unique: a choice)
  EXPECT_TRUE(nullable_warnings({}).empty());        // the primary key
  // The primary key within the key columns: each row has its own key.
  EXPECT_TRUE(nullable_warnings({"id", "serial"}).empty());
  // A unique index on NOT NULL columns within them: the same.
  devices.primary_key.clear();
  EXPECT_EQ(nullable_warnings({"id", "serial"}).size(), 1u);
  devices.unique_keys = {{"site", "id"}};
  EXPECT_TRUE(nullable_warnings({"serial", "id", "site"}).empty());
  EXPECT_EQ(nullable_warnings({"serial", "site"}).size(), 1u);  // only part of that index
}

}  // namespace
}  // namespace walrelay
