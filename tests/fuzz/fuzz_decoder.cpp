// libFuzzer target: wal2json format-version 2 lines -> Wal2JsonDecoder -> EventRouter.
//
// The input is split on '\n'; each line is one XLogData payload. Lines are driven through the
// decoder and two routers (two configurations, loaded from YAML so they are configurations the
// loader accepts) the way Connector::on_xlogdata drives them: B opens a transaction (ignored
// inside one), C closes it (ignored outside one), everything else is routed, also outside a
// transaction (non-transactional messages, and what errors.policy=dead_letter goes on with).
// Decode and mapping errors are expected results; crashes, sanitizer reports and leaks are bugs.
// Every byte of every produced Record is read, so a view into a freed or reused buffer is caught.
// Each line is also decoded by simdjson alone (Wal2JsonDecoder(false)): the two must agree.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "walrelay/config/config.hpp"
#include "walrelay/core/lsn.hpp"
#include "walrelay/core/record.hpp"
#include "walrelay/decoder/change.hpp"
#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/router/type_registry.hpp"

namespace {

using walrelay::Lsn;
using walrelay::Record;
using walrelay::config::Config;
using walrelay::decoder::Action;
using walrelay::decoder::Change;
using walrelay::decoder::Wal2JsonDecoder;
using walrelay::router::EventRouter;
using walrelay::router::RouterSettings;
using walrelay::router::TypeRegistry;

// Native values, JSON as documents, transaction metadata, masking, per-table options, an outbox
// table with every optional column, and a logical-message outbox. Table names match the seed
// corpus (shared/cases, tests/fixtures/wal2json).
constexpr const char* kNativeConfig = R"(name: fuzz
source: {conninfo: "host=127.0.0.1 dbname=app"}
events:
  value_format: native
  json_as_document: true
  transaction_metadata: true
  mask_salt: pepper
  operations: [c, u, d, t]
  partitions: root
tables:
  - name: public.outbox_event
    outbox:
      event_id: event_id
      aggregate_id: aggregate_id
      aggregate_type: event_type
      payload: payload
      event_type: event_type
      timestamp: created_at
      additional: {aggregate_id: header, event_type: "header:kind"}
      topic: "outbox.event.{aggregate_type}"
      payload_digest: true
      tombstone_on_empty_payload: true
  - name: public.customer
    topic: "{prefix}.crm.{table}"
    key_columns: [id]
    exclude_columns: [notes]
    mask_columns: [email, name]
    tombstones_on_delete: false
  - name: public.booking
    operations: [u, d]
  - name: int.*
    key_columns: [id, missing_column]
  - name: public.*
  - name: "*.*"
exclude:
  - public.audit_log
messages:
  - prefix: outbox
    outbox:
      event_id: id
      aggregate_id: id
      aggregate_type: type
      payload: payload
      payload_digest: true
  - prefix: audit
)";

// Debezium values, leaf partitions, no tombstones, an outbox with the default column names.
constexpr const char* kDebeziumConfig = R"(name: fuzz-dbz
source: {conninfo: "postgresql://u:p@127.0.0.1/app"}
topics: {prefix: "dbz"}
events:
  value_format: debezium
  tombstones_on_delete: false
  toast_placeholder: ""
  partitions: leaf
tables:
  - name: public.outbox_*
    outbox: {}
  - name: "*.*"
messages:
  - prefix: outbox
    outbox: {event_id: id, aggregate_id: id, aggregate_type: type, tombstone_on_empty_payload: true}
  - prefix: bin
)";

Config load_or_die(const char* yaml) {
  auto env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  walrelay::config::LoadResult r = walrelay::config::load_config_text(yaml, "fuzz", env);
  if (!r.config) {
    for (const auto& e : r.errors)
      std::fprintf(stderr, "%s: %s\n", e.key.c_str(), e.reason.c_str());
    std::abort();  // the harness itself is broken
  }
  return *r.config;
}

struct Pipeline {
  Config cfg;
  RouterSettings settings;
  Pipeline(const char* yaml, std::string version)
      : cfg(load_or_die(yaml)),
        settings{cfg.name, cfg.topics.prefix, "app", std::move(version), cfg.events} {}
};

const TypeRegistry& types() {
  static const TypeRegistry registry;
  return registry;
}

// Touches every byte of the records: ASan reports any view into freed memory.
std::uint64_t consume(std::span<const Record> records) {
  std::uint64_t h = records.size();
  auto mix = [&h](std::string_view s) {
    for (char ch : s) h = h * 131 + static_cast<unsigned char>(ch);
  };
  for (const Record& r : records) {
    mix(r.topic);
    if (r.key) mix(*r.key);
    if (r.value) mix(*r.value);
    for (const auto& hd : r.headers) {
      mix(hd.name);
      mix(hd.value);
    }
    h ^= static_cast<std::uint64_t>(r.timestamp_ms);
  }
  return h;
}

struct Driver {
  std::unique_ptr<EventRouter> router;
  bool in_txn = false;

  std::uint64_t feed(const Change& c) {
    switch (c.action) {
      case Action::kBegin:
        if (in_txn) return 0;
        in_txn = true;
        router->begin(c.xid, c.lsn,
                      walrelay::router::parse_commit_timestamp(c.timestamp)
                          .value_or(std::chrono::microseconds{0}));
        return 0;
      case Action::kCommit:
        if (!in_txn) return 0;
        in_txn = false;
        return consume(router->commit(c.next_lsn));
      default: {
        auto routed = router->route(c);
        if (!routed) return routed.error().reason.size();
        return consume(*routed);
      }
    }
  }
};

// The decoder's fast path and its simdjson path must agree on every line (same Change, or the
// same error): a difference aborts.
void check_same(const std::expected<const Change*, walrelay::decoder::DecodeError>& fast,
                const std::expected<const Change*, walrelay::decoder::DecodeError>& slow) {
  bool same = fast.has_value() == slow.has_value();
  if (same && !fast) same = fast.error().reason == slow.error().reason;
  if (same && fast) {
    const Change& a = **fast;
    const Change& b = **slow;
    auto same_columns = [](const std::vector<walrelay::decoder::Column>& x,
                           const std::vector<walrelay::decoder::Column>& y) {
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (x[i].name != y[i].name || x[i].name_json != y[i].name_json ||
            x[i].type_oid != y[i].type_oid || x[i].value != y[i].value) {
          return false;
        }
      }
      return true;
    };
    same = a.action == b.action && a.xid == b.xid && a.lsn == b.lsn && a.next_lsn == b.next_lsn &&
           a.timestamp == b.timestamp && a.schema == b.schema && a.table == b.table &&
           same_columns(a.columns, b.columns) && same_columns(a.identity, b.identity) &&
           a.pk == b.pk && a.transactional == b.transactional && a.prefix == b.prefix &&
           a.content == b.content;
  }
  if (!same) {
    std::fprintf(stderr, "fast path and simdjson disagree\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Pipeline native(kNativeConfig, "0.1.0");
  static Pipeline debezium(kDebeziumConfig, "9.9.9-fuzz");
  static Wal2JsonDecoder decoder;  // reused across inputs, as the connector reuses it
  static Wal2JsonDecoder simdjson_only(false);

  // Fresh routers per input so a finding reproduces from its input alone.
  Driver drivers[2];
  drivers[0].router = std::make_unique<EventRouter>(native.settings, native.cfg, nullptr, types());
  drivers[1].router =
      std::make_unique<EventRouter>(debezium.settings, debezium.cfg, nullptr, types());

  const std::string_view input(reinterpret_cast<const char*>(data), size);
  volatile std::uint64_t sink = 0;
  std::size_t pos = 0;
  while (pos <= input.size()) {
    std::size_t end = input.find('\n', pos);
    if (end == std::string_view::npos) end = input.size();
    // Copy the line into its own allocation so ASan sees reads past its end.
    const std::string_view view = input.substr(pos, end - pos);
    const std::unique_ptr<char[]> line(new char[view.size()]);
    if (!view.empty()) std::memcpy(line.get(), view.data(), view.size());
    check_same(decoder.decode(std::string_view(line.get(), view.size())),
               simdjson_only.decode(std::string_view(line.get(), view.size())));
    auto decoded = decoder.decode(std::string_view(line.get(), view.size()));
    if (decoded) {
      const Change& c = **decoded;
      for (Driver& d : drivers) sink = sink + d.feed(c);
    } else {
      sink = sink + decoded.error().reason.size();
    }
    pos = end + 1;
  }
  // Table lookups with whatever names the input had.
  for (Driver& d : drivers) {
    sink = sink + static_cast<std::uint64_t>(d.router->role_of("public", input.substr(0, 64)));
    sink = sink + d.router->topic_of(input.substr(0, 16), input.substr(0, 64)).size();
  }
  (void)sink;
  return 0;
}
