// Row-change events the benchmarks route: wal2json format-version 2 lines as walrelay asks for
// them (include-xids, include-timestamp, include-lsn, include-pk, include-type-oids), with the
// table shapes a catalog would give, in both value formats.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"

namespace walrelay::bench {

/// The 5-column insert of BM_DecodeAndRoute (wide numbers, a uuid, escapes in text).
inline constexpr const char* kInvoiceInsert =
    R"({"action":"I","xid":1031,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3D838","schema":"public","table":"invoices","columns":[{"name":"invoice_id","typeoid":20,"value":9007199254740993},{"name":"subscription_id","typeoid":2950,"value":"3f1c2a9e-0000-4000-8000-000000000001"},{"name":"amount","typeoid":1700,"value":12345678901234567890.123456789},{"name":"status","typeoid":25,"value":"open"},{"name":"note","typeoid":25,"value":"a short note with \"quotes\" and unicode \u00e9"}],"pk":[{"name":"invoice_id","typeoid":20}]})";

/// A row of benchmarks/e2e.sh's table (id bigint, account int, amount numeric(12,2), note text,
/// created_at timestamptz).
inline constexpr const char* kOrderInsert =
    R"({"action":"I","xid":1040,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3E000","schema":"public","table":"orders","columns":[{"name":"id","typeoid":20,"value":123457},{"name":"account","typeoid":23,"value":457},{"name":"amount","typeoid":1700,"value":234.57},{"name":"note","typeoid":25,"value":"note 123457"},{"name":"created_at","typeoid":1184,"value":"2026-11-30 00:14:37.104367+00"}],"pk":[{"name":"id","typeoid":20}]})";

/// An UPDATE of that table under REPLICA IDENTITY DEFAULT (key unchanged: no identity).
inline constexpr const char* kOrderUpdate =
    R"({"action":"U","xid":1040,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3E100","schema":"public","table":"orders","columns":[{"name":"id","typeoid":20,"value":123457},{"name":"account","typeoid":23,"value":458},{"name":"amount","typeoid":1700,"value":1234.50},{"name":"note","typeoid":25,"value":"note 123457 updated"},{"name":"created_at","typeoid":1184,"value":"2026-11-30 00:14:37.104367+00"}],"pk":[{"name":"id","typeoid":20}]})";

/// A DELETE of that table: the old key only (a debezium-format `before` lists every column).
inline constexpr const char* kOrderDelete =
    R"({"action":"D","xid":1040,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3E200","schema":"public","table":"orders","identity":[{"name":"id","typeoid":20,"value":123457}],"pk":[{"name":"id","typeoid":20}]})";

/// An INSERT into the outbox table `outbox` (id uuid, aggregatetype, aggregateid, type text,
/// payload jsonb) with a ~1 KB payload: jsonb text is a JSON string inside wal2json's line, so
/// every quote of it arrives escaped (the benchmarks' "outbox" workload).
inline const std::string& outbox_insert() {
  static const std::string line = [] {
    std::string payload = R"({"lines": [)";
    for (int i = 0; i < 12; ++i) {
      if (i > 0) payload += ", ";
      payload += R"({"qty": )" + std::to_string(i + 1) + R"(, "sku": "SKU-)" +
                 std::to_string(1000 + i) +
                 R"(", "price": "19.99", "title": "a line of the order"})";
    }
    payload += R"(], "order_id": 123457, "customer": "c-42", "currency": "EUR"})";
    std::string escaped;
    for (char c : payload) {
      if (c == '"') escaped += '\\';
      escaped += c;
    }
    return std::string(
               R"({"action":"I","xid":1050,"timestamp":"2026-11-30 00:14:37.104367+00","lsn":"0/26B3F000","schema":"public","table":"outbox","columns":[{"name":"id","typeoid":2950,"value":"3f1c2a9e-0000-4000-8000-000000000002"},{"name":"aggregatetype","typeoid":25,"value":"order"},{"name":"aggregateid","typeoid":25,"value":"123457"},{"name":"type","typeoid":25,"value":"OrderCreated"},{"name":"payload","typeoid":3802,"value":")") +
           escaped + R"("}],"pk":[{"name":"id","typeoid":2950}]})";
  }();
  return line;
}

/// The catalog's shapes of `invoices`, `orders` and `outbox`.
struct Schemas : router::SchemaProvider {
  std::map<std::string, router::TableSchema, std::less<>> tables;

  Schemas() {
    using router::ColumnInfo;
    router::TableSchema inv;
    inv.schema = inv.root_schema = "public";
    inv.table = inv.root_table = "invoices";
    inv.columns = {ColumnInfo{"invoice_id", 20, -1, true, false},
                   ColumnInfo{"subscription_id", 2950, -1, false, false},
                   ColumnInfo{"amount", 1700, -1, false, true},
                   ColumnInfo{"status", 25, -1, false, true},
                   ColumnInfo{"note", 25, -1, false, true}};
    inv.primary_key = {"invoice_id"};
    tables["public.invoices"] = inv;
    router::TableSchema ord;
    ord.schema = ord.root_schema = "public";
    ord.table = ord.root_table = "orders";
    ord.columns = {
        ColumnInfo{"id", 20, -1, true, false}, ColumnInfo{"account", 23, -1, true, false},
        ColumnInfo{"amount", 1700, (12 << 16 | 2) + 4, false, true},  // numeric(12,2)
        ColumnInfo{"note", 25, -1, false, true}, ColumnInfo{"created_at", 1184, -1, true, false}};
    ord.primary_key = {"id"};
    tables["public.orders"] = ord;
    router::TableSchema box;
    box.schema = box.root_schema = "public";
    box.table = box.root_table = "outbox";
    box.columns = {
        ColumnInfo{"id", 2950, -1, true, false}, ColumnInfo{"aggregatetype", 25, -1, true, false},
        ColumnInfo{"aggregateid", 25, -1, true, false}, ColumnInfo{"type", 25, -1, true, false},
        ColumnInfo{"payload", 3802, -1, false, true}};
    box.primary_key = {"id"};
    tables["public.outbox"] = box;
  }

  const router::TableSchema* table(std::string_view schema, std::string_view name,
                                   bool /*refresh*/) override {
    const auto it = tables.find(std::string(schema) + "." + std::string(name));
    return it == tables.end() ? nullptr : &it->second;
  }
};

/// One benchmark case: a line and the value format it is routed in.
struct Scenario {
  const char* name;
  const char* line;
  const char* value_format;  ///< "native" or "debezium"
};

inline const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"invoice_insert_native", kInvoiceInsert, "native"},
      {"invoice_insert_debezium", kInvoiceInsert, "debezium"},
      {"order_insert_native", kOrderInsert, "native"},
      {"order_insert_debezium", kOrderInsert, "debezium"},
      {"order_update_debezium", kOrderUpdate, "debezium"},
      {"order_delete_debezium", kOrderDelete, "debezium"},
      {"outbox_insert_1kb", outbox_insert().c_str(), "native"},
  };
  return all;
}

/// A decoder and a router set up like the connector's (catalog shapes, one open transaction).
struct Pipeline {
  decoder::Wal2JsonDecoder decoder;
  config::Config cfg;
  router::TypeRegistry types;
  Schemas schemas;
  std::unique_ptr<router::EventRouter> router;

  explicit Pipeline(std::string_view value_format) {
    for (const char* t : {"invoices", "orders"}) {
      config::TableConfig tc;
      tc.name = std::string("public.") + t;
      tc.schema_pattern = "public";
      tc.table_pattern = t;
      cfg.tables.push_back(tc);
    }
    config::TableConfig box;
    box.name = "public.outbox";
    box.schema_pattern = "public";
    box.table_pattern = "outbox";
    box.outbox = config::OutboxConfig{};
    box.outbox->event_type = "type";
    cfg.tables.push_back(box);
    cfg.events.value_format =
        value_format == "debezium" ? config::ValueFormat::kDebezium : config::ValueFormat::kNative;
    router = std::make_unique<router::EventRouter>(
        router::RouterSettings{"bench", "bench", "app", "0", cfg.events}, cfg, &schemas, types);
    router->begin(1031, Lsn(0x26B3D938), std::chrono::microseconds{1795997677104367});
  }

  /// Decodes and routes one line; returns the number of records (0 on an error).
  std::size_t run(std::string_view line) {
    auto c = decoder.decode(line);
    if (!c) return 0;
    auto recs = router->route(**c);
    return recs ? recs->size() : 0;
  }
};

}  // namespace walrelay::bench
