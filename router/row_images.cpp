// A row change's before and after images: the columns of a change as a JSON object, excluded
// columns left out, masked columns hashed, unchanged TOASTed columns of an UPDATE filled in.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "event_router_internal.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

using detail::append_sha256_hex;
using detail::append_text;
using detail::contains;
using detail::find_column;

void EventRouter::append_image(std::string& out, const std::vector<decoder::Column>& cols,
                               const Rule& rule, std::string& err, bool padded) {
  out.push_back('{');
  bool first = true;
  const auto* schema = rule.schema;
  for (std::size_t i = 0; i < cols.size() && err.empty(); ++i) {
    const auto& col = cols[i];
    if (!rule.exclude.empty() && contains(rule.exclude, col.name)) continue;
    if (!first) out.push_back(',');
    first = false;
    out.append(col.name_json);
    out.push_back(':');
    // The catalog's column (by position, else by name) gives the typmod and NOT NULL.
    const ColumnInfo* ci = nullptr;
    if (schema != nullptr) {
      ci = i < schema->columns.size() && schema->columns[i].name == col.name
               ? &schema->columns[i]
               : schema->column(col.name);
    }
    append_column(out, col, rule, i, ci != nullptr ? ci->typmod : -1,
                  ci != nullptr && ci->not_null && !padded, err);
  }
  out.push_back('}');
}

const ResolvedType& EventRouter::column_type(const Rule& rule, std::size_t position,
                                             std::uint32_t type_oid, std::int32_t typmod) {
  auto& cache = rule.column_types;
  if (position >= cache.size()) cache.resize(position + 1);
  ResolvedType& t = cache[position];
  if (!resolved_for(t, type_oid, typmod, types_)) t = resolve_type(type_oid, typmod, types_);
  return t;
}

void EventRouter::note_nan_as_null(const Rule& rule, const decoder::Column& col) {
  // A NOT NULL column cannot hold SQL NULL: wal2json < 2.6 prints NaN and ±Infinity of numeric,
  // real and double precision as `null` (tests/unit/router_test.cpp, NanAsNull…). Count it and say
  // so once per column; the value cannot be recovered from this plugin version.
  const std::uint32_t type = types_.resolve_domain(col.type_oid);
  if (type != oid::kNumeric && type != oid::kFloat4 && type != oid::kFloat8) return;
  ++nan_as_null_;
  std::string key = rule.data_collection + "." + std::string(col.name);
  if (nan_warned_.insert(key).second) {
    spdlog::warn(
        "column {} is NOT NULL but arrived as null: wal2json before 2.6 prints NaN and "
        "Infinity of numeric/float columns as null, so the event carries null (counted; warned "
        "once per column). Upgrade wal2json to 2.6+ to receive them as strings",
        key);
  }
}

bool EventRouter::append_after_image(std::string& out, const decoder::Change& c, const Rule& rule,
                                     std::string& err) {
  const auto* schema = rule.schema;
  if (c.action != decoder::Action::kUpdate || schema == nullptr ||
      (c.columns.size() == schema->columns.size() &&
       std::equal(
           c.columns.begin(), c.columns.end(), schema->columns.begin(),
           [](const decoder::Column& a, const ColumnInfo& b) { return a.name == b.name; }))) {
    append_image(out, c.columns, rule, err);
    return err.empty();
  }
  // An UPDATE leaves out unchanged TOASTed columns (wal2json skips unchanged external datums).
  // Never publish them as null: take the old value under REPLICA IDENTITY FULL, otherwise the
  // placeholder (Debezium unavailable.value.placeholder). The change's own columns are its shape
  // (a backlog is decoded after later DDL; test EventSemanticsTest.
  // UnchangedToastInABacklogKeepsTheShapeItWasWrittenWith): each is published with its value,
  // also one the catalog no longer has (dropped since); a catalog column it lacks gets the
  // placeholder only if it existed when the change was written (never one added since). Both
  // lists are in attnum order: the catalog's columns are placed among the change's by name.
  const std::size_t last_existing = columns_existing_at(*schema, c.xid);
  out.push_back('{');
  bool first = true;
  std::size_t next = 0;  // the next catalog position not yet placed
  // A value typed by the change; `sc` (may be null: the catalog lacks the column) gives the typmod
  // and NOT NULL when it still has the change's type.
  const auto append_catalog_column = [&](const decoder::Column& col, std::size_t position,
                                         const ColumnInfo* sc) {
    const bool same_type = sc != nullptr && sc->type_oid == col.type_oid;
    return append_column(out, col, rule, position, same_type ? sc->typmod : -1,
                         same_type && sc->not_null, err);
  };
  // A catalog column the change lacks: its old value, the placeholder, or nothing.
  const auto append_absent = [&](std::size_t position) {
    const ColumnInfo& sc = schema->columns[position];
    if (find_column(c.columns, sc.name) != nullptr) return true;  // placed by the change
    const decoder::Column* old = find_column(c.identity, sc.name);
    if (old == nullptr && (!sc.toastable || position >= last_existing)) return true;
    if (!rule.exclude.empty() && contains(rule.exclude, sc.name)) return true;
    if (!first) out.push_back(',');
    first = false;
    json::append_string(out, sc.name);
    out.push_back(':');
    if (old == nullptr) {
      json::append_string(out, settings_.events.toast_placeholder);
      return true;
    }
    return append_catalog_column(*old, position, &sc);
  };
  // One of the change's columns; `at`: its catalog position (npos: the catalog lacks it).
  const auto append_own = [&](std::size_t i, std::size_t at) {
    const decoder::Column& col = c.columns[i];
    if (!rule.exclude.empty() && contains(rule.exclude, col.name)) return true;
    if (!first) out.push_back(',');
    first = false;
    out.append(col.name_json);
    out.push_back(':');
    // A column the catalog lacks (dropped since) is typed by the change alone.
    const bool known = at != std::string::npos;
    return append_catalog_column(col, known ? at : schema->columns.size() + i,
                                 known ? &schema->columns[at] : nullptr);
  };
  // Change columns the catalog lacks wait for the next one it has: the catalog's columns of the
  // gap are placed before them (their attnums are not in the change).
  std::size_t pending = 0;
  for (std::size_t i = 0; i < c.columns.size(); ++i) {
    const decoder::Column& col = c.columns[i];
    std::size_t at = next < schema->columns.size() && schema->columns[next].name == col.name
                         ? next
                         : std::string::npos;
    for (std::size_t p = 0; at == std::string::npos && p < schema->columns.size(); ++p) {
      if (schema->columns[p].name == col.name) at = p;
    }
    if (at == std::string::npos) continue;
    for (; next < at; ++next) {
      if (!append_absent(next)) return false;
    }
    if (next == at) ++next;
    for (; pending < i; ++pending) {
      if (!append_own(pending, std::string::npos)) return false;
    }
    if (!append_own(i, at)) return false;
    pending = i + 1;
  }
  for (; next < schema->columns.size(); ++next) {
    if (!append_absent(next)) return false;
  }
  for (; pending < c.columns.size(); ++pending) {
    if (!append_own(pending, std::string::npos)) return false;
  }
  out.push_back('}');
  return true;
}

bool EventRouter::append_column(std::string& out, const decoder::Column& col, const Rule& rule,
                                std::size_t position, std::int32_t typmod, bool not_null,
                                std::string& err) {
  if (!rule.mask.empty() && contains(rule.mask, col.name) && !col.is_null()) {
    // column.mask.hash.SHA-256.with.salt: hex SHA-256 of salt + the value's text.
    scratch2_.clear();
    append_text(scratch2_, col.value);
    out.push_back('"');
    append_sha256_hex(out, settings_.events.mask_salt, scratch2_);
    out.push_back('"');
    return true;
  }
  if (not_null && col.is_null()) note_nan_as_null(rule, col);
  if (!append_value(out, col.value, column_type(rule, position, col.type_oid, typmod), types_,
                    value_opts_, err)) {
    err = "column " + std::string(col.name) + ": " + err;
    return false;
  }
  return true;
}

}  // namespace walrelay::router
