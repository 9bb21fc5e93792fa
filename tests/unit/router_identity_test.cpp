// Keys of tables without a primary key from the replica identity a change was written under, and
// relation kinds that are never published (issue 25 items 1-3), against a catalog stand-in.

#include <gtest/gtest.h>

#include <map>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

using walrelay::Lsn;
using walrelay::Record;
using walrelay::config::Config;
using walrelay::config::TableConfig;
using walrelay::decoder::Wal2JsonDecoder;
using walrelay::router::ColumnInfo;
using walrelay::router::EventRouter;
using walrelay::router::SchemaProvider;
using walrelay::router::TableSchema;
using walrelay::router::TypeRegistry;

namespace {

struct FakeSchemas : SchemaProvider {
  std::map<std::string, TableSchema> tables;
  int refreshes = 0;
  const TableSchema* table(std::string_view schema, std::string_view name, bool refresh) override {
    if (refresh) ++refreshes;
    auto it = tables.find(std::string(schema) + "." + std::string(name));
    return it == tables.end() ? nullptr : &it->second;
  }
};

struct Harness {
  Config cfg;
  TypeRegistry types;
  FakeSchemas schemas;
  std::unique_ptr<EventRouter> router;
  Wal2JsonDecoder decoder;

  Harness() {
    cfg.name = "app";
    cfg.topics.prefix = "app";
    TableConfig t;
    t.name = "public.*";
    t.schema_pattern = "public";
    t.table_pattern = "*";
    cfg.tables = {t};
    // ri (a int NOT NULL, f boolean NOT NULL, v text), REPLICA IDENTITY USING INDEX (a, f).
    TableSchema ri;
    ri.schema = ri.root_schema = "public";
    ri.table = ri.root_table = "ri";
    ri.columns = {ColumnInfo{"a", 23, -1, true, false}, ColumnInfo{"f", 16, -1, true, false},
                  ColumnInfo{"v", 25, -1, false, true}};
    ri.replica_identity = 'i';
    ri.replica_identity_index = {"a", "f"};
    schemas.tables["public.ri"] = ri;
  }

  void begin() {
    if (!router) {
      walrelay::router::RouterSettings s{"app", "app", "app", "0.1.0", cfg.events};
      router = std::make_unique<EventRouter>(s, cfg, &schemas, types);
    }
    router->begin(7, *Lsn::parse("0/10"), std::chrono::microseconds{1795997677104367});
  }

  // The records' keys ("null" for a null key), or "error: <reason>".
  std::vector<std::string> keys(const std::string& line) {
    if (!router) begin();
    auto c = decoder.decode(line);
    EXPECT_TRUE(c) << (c ? "" : c.error().reason);
    if (!c) return {};
    auto recs = router->route(**c);
    if (!recs) return {"error: " + recs.error().reason};
    std::vector<std::string> out;
    for (const Record& r : *recs) out.push_back(r.key ? std::string(*r.key) : "null");
    return out;
  }
};

std::string line(const std::string& action, const std::string& table, const std::string& rest) {
  return R"({"action":")" + action + R"(","xid":7,"lsn":"0/10","schema":"public","table":")" +
         table + R"(",)" + rest + "}";
}

const std::string kA2 = R"({"name":"a","typeoid":23,"value":2})";
const std::string kF = R"({"name":"f","typeoid":16,"value":false})";
const std::string kD = R"({"name":"d","typeoid":16,"value":false})";
const std::string kV = R"({"name":"v","typeoid":25,"value":"y"})";

}  // namespace

TEST(RouterIdentity, RenamedIdentityColumnKeysByTheIdentityNeverTheWholeRow) {
  Harness h;
  EXPECT_EQ(h.keys(line("I", "ri", R"("columns":[)" + kA2 + "," + kF + "," + kV + "]")),
            std::vector<std::string>{R"({"a":2,"f":false})"});
  EXPECT_EQ(h.keys(line("U", "ri",
                        R"("columns":[)" + kA2 + "," + kF + "," + kV + R"(],"identity":[)" + kA2 +
                            "," + kF + "]")),
            std::vector<std::string>{R"({"a":2,"f":false})"});
  EXPECT_EQ(h.keys(line("D", "ri", R"("identity":[)" + kA2 + "," + kF + "]")),
            (std::vector<std::string>{R"({"a":2,"f":false})", R"({"a":2,"f":false})"}));
  // Written before the rename (d), decoded with the catalog's (a, f): an INSERT cannot tell.
  const auto err = h.keys(line("I", "ri", R"("columns":[)" + kA2 + "," + kD + "," + kV + "]"));
  ASSERT_EQ(err.size(), 1u);
  EXPECT_NE(err[0].find("error: "), std::string::npos) << err[0];
  EXPECT_NE(err[0].find("no column f of the identity index"), std::string::npos) << err[0];
  // An UPDATE names its identity: the index as written, by the names in the change.
  EXPECT_EQ(h.keys(line("U", "ri",
                        R"("columns":[)" + kA2 + "," + kD + "," + kV + R"(],"identity":[)" + kA2 +
                            "," + kD + "]")),
            std::vector<std::string>{R"({"a":2,"d":false})"});
  // A DELETE whose identity names a column the table does not have: an index or FULL? An error.
  const auto del = h.keys(line("D", "ri", R"("identity":[)" + kA2 + "," + kD + "]"));
  ASSERT_EQ(del.size(), 1u);
  EXPECT_NE(del[0].find("cannot tell the REPLICA IDENTITY this DELETE"), std::string::npos)
      << del[0];
}

TEST(RouterIdentity, IdentityAsWrittenKeysUpdatesAndDeletesWhateverTheCatalogSays) {
  Harness h;
  h.schemas.tables["public.ri"].replica_identity = 'd';  // DEFAULT again by now
  h.schemas.tables["public.ri"].replica_identity_index.clear();
  // Written under USING INDEX (a): the identity is a part of the row.
  const std::string a2 = R"({"name":"a","typeoid":23,"value":2})";
  EXPECT_EQ(
      h.keys(line("U", "ri",
                  R"("columns":[)" + a2 + "," + kF + "," + kV + R"(],"identity":[)" + a2 + "]")),
      std::vector<std::string>{R"({"a":2})"});
  EXPECT_EQ(h.keys(line("D", "ri", R"("identity":[)" + a2 + "]")),
            (std::vector<std::string>{R"({"a":2})", R"({"a":2})"}));
  // Written under FULL: the whole old row, a null key.
  EXPECT_EQ(h.keys(line("U", "ri",
                        R"("columns":[)" + a2 + "," + kF + "," + kV + R"(],"identity":[)" + a2 +
                            "," + kF + "," + kV + "]")),
            std::vector<std::string>{"null"});
  EXPECT_EQ(h.keys(line("D", "ri", R"("identity":[)" + a2 + "," + kF + "," + kV + "]")),
            (std::vector<std::string>{"null", "null"}));
  EXPECT_EQ(h.keys(line("I", "ri", R"("columns":[)" + a2 + "," + kF + "," + kV + "]")),
            std::vector<std::string>{"null"});
}

TEST(RouterIdentity, ATransactionWithoutChangesMakesIdentityKeyedTablesReadTheirShapeAgain) {
  Harness h;
  const std::string insert = line("I", "ri", R"("columns":[)" + kA2 + "," + kF + "," + kV + "]");
  h.keys(insert);
  h.router->commit(*Lsn::parse("0/20"));
  h.begin();
  h.keys(insert);
  EXPECT_EQ(h.schemas.refreshes, 0);
  h.router->commit(*Lsn::parse("0/30"));
  h.begin();  // DDL: a transaction without changes
  h.router->commit(*Lsn::parse("0/40"));
  h.begin();
  EXPECT_TRUE(h.router->lookup_needed(**h.decoder.decode(insert)));
  h.keys(insert);
  EXPECT_EQ(h.schemas.refreshes, 1);
  h.keys(insert);
  EXPECT_EQ(h.schemas.refreshes, 1);  // once per such transaction
}

TEST(RouterIdentity, MaterializedViewIsNeverPublished) {
  Harness h;
  TableSchema mv;
  mv.schema = mv.root_schema = "public";
  mv.table = mv.root_table = "by_region";
  mv.columns = {ColumnInfo{"a", 23, -1, false, false}};
  mv.kind = 'm';
  h.schemas.tables["public.by_region"] = mv;
  const std::string a = R"({"name":"a","typeoid":23,"value":1})";
  EXPECT_TRUE(h.keys(line("I", "by_region", R"("columns":[)" + a + "]")).empty());
  EXPECT_TRUE(h.keys(line("D", "by_region", R"("identity":[)" + a + "]")).empty());
  // A table dropped and made again as a materialized view under the same name.
  const std::string ri = line("I", "ri", R"("columns":[)" + kA2 + "," + kF + "," + kV + "]");
  EXPECT_EQ(h.keys(ri).size(), 1u);
  h.schemas.tables["public.ri"].kind = 'm';
  h.schemas.tables["public.ri"].columns.pop_back();
  EXPECT_TRUE(h.keys(line("I", "ri", R"("columns":[)" + kA2 + "," + kF + "]")).empty());
}
