// A row change's Kafka key: which columns key it (select_key: key_columns, the change's primary
// key, or its REPLICA IDENTITY index), the key's JSON, and the key as Kafka Connect's header
// converter prints it (the __debezium.newkey/oldkey headers).

#include <algorithm>

#include "event_router_internal.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

using detail::contains;
using detail::find_column;
using detail::join_names;

bool EventRouter::select_key(const decoder::Change& c, const Rule& rule, std::string& err) {
  // The columns an event is keyed by, from the change itself (tests/integration/cases/CASE-05.sql:
  // a key never depends on when walrelay last read the catalog): the tables entry's key_columns;
  // else the line's own `pk` (wal2json's primary key of the row as written), in the constraint's
  // order when the catalog's primary key names the same columns (Debezium keys in the key's
  // declaration order); else, for a table without a primary key, its REPLICA IDENTITY index as
  // written.
  key_order_.clear();
  if (!rule.key_columns.empty()) {
    for (const auto& k : rule.key_columns) key_order_.emplace_back(k);
    return true;
  }
  if (!c.pk.empty()) {
    const bool catalog_agrees =
        rule.schema != nullptr && rule.schema->primary_key.size() == c.pk.size() &&
        std::all_of(c.pk.begin(), c.pk.end(),
                    [&](std::string_view k) { return contains(rule.schema->primary_key, k); });
    if (catalog_agrees) {
      for (const auto& k : rule.schema->primary_key) key_order_.emplace_back(k);
    } else {
      key_order_.assign(c.pk.begin(), c.pk.end());
    }
    return true;
  }
  if (rule.schema == nullptr) return true;  // no catalog shape: null key, as before
  return select_identity_key(c, *rule.schema, err);
}

bool EventRouter::select_identity_key(const decoder::Change& c, const TableSchema& shape,
                                      std::string& err) {
  // A row without a primary key is keyed by its REPLICA IDENTITY USING INDEX columns (FULL,
  // DEFAULT and NOTHING give a null key). An UPDATE or DELETE names the identity it was written
  // under (wal2json's `identity`: the index's columns, or the whole old row under FULL); an
  // INSERT carries none, so the catalog (read again after DDL, shape_refresh_due) tells, and an
  // INSERT without the catalog's index columns (renamed or dropped since) cannot be decided.
  using decoder::Action;
  const bool catalog_index = shape.replica_identity == 'i' && !shape.replica_identity_index.empty();
  const auto use_catalog_index = [&] {
    for (const auto& k : shape.replica_identity_index) key_order_.emplace_back(k);
  };
  const bool identity_image =
      (c.action == Action::kUpdate || c.action == Action::kDelete) && !c.identity.empty();
  if (!identity_image) {
    if (!catalog_index) return true;
    std::vector<std::string_view> absent;
    for (const auto& k : shape.replica_identity_index) {
      if (find_column(c.columns, k) == nullptr) absent.push_back(k);
    }
    if (c.action == Action::kInsert && !absent.empty()) {
      err = "cannot tell the REPLICA IDENTITY this INSERT was written under: it has no column " +
            join_names(absent) + " of the identity index (" +
            join_names(std::vector<std::string_view>(shape.replica_identity_index.begin(),
                                                     shape.replica_identity_index.end())) +
            ") the catalog has now (renamed or dropped since?); not published with another key";
      return false;
    }
    use_catalog_index();
    return true;
  }
  const bool agrees =
      catalog_index && c.identity.size() == shape.replica_identity_index.size() &&
      std::all_of(c.identity.begin(), c.identity.end(), [&](const decoder::Column& k) {
        return contains(shape.replica_identity_index, k.name);
      });
  if (agrees) {
    use_catalog_index();  // the index's own column order
    return true;
  }
  // The identity as written differs from the catalog's: USING INDEX (only the index's columns)
  // or FULL (the whole old row, a null key)?
  bool index = false;
  if (c.action == Action::kUpdate) {
    // FULL's old row has every column, the new one may lack only unchanged TOASTed ones.
    if (c.identity.size() < c.columns.size()) {
      index = true;
    } else if (c.identity.size() == c.columns.size()) {
      index = std::any_of(shape.columns.begin(), shape.columns.end(), [&](const ColumnInfo& col) {
        return find_column(c.columns, col.name) == nullptr;
      });
    }
  } else {
    std::vector<std::string_view> unknown;
    for (const auto& k : c.identity) {
      if (shape.column(k.name) == nullptr) unknown.push_back(k.name);
    }
    if (!unknown.empty()) {
      err =
          "cannot tell the REPLICA IDENTITY this DELETE was written under (an index or FULL): "
          "its identity names column " +
          join_names(unknown) +
          ", which the table does not have now (renamed or dropped since?); not published "
          "with another key";
      return false;
    }
    index = c.identity.size() < shape.columns.size();
  }
  if (index) {
    for (const auto& k : c.identity) key_order_.push_back(k.name);
  }
  return true;
}

bool EventRouter::append_key(std::string& out, const std::vector<decoder::Column>& image,
                             const Rule& rule, std::string& err, std::string* header) {
  // Key columns (select_key's order), compact JSON: what Debezium's JsonConverter prints with
  // schemas disabled, so murmur2 places the key where Debezium did.
  out.push_back('{');
  if (header != nullptr) header->assign("{");
  bool any = false;
  for (std::string_view name : key_order_) {
    const decoder::Column* col = find_column(image, name);
    if (col == nullptr) continue;
    if (any) out.push_back(',');
    if (any && header != nullptr) header->push_back(',');
    any = true;
    out.append(col->name_json);
    out.push_back(':');
    std::int32_t typmod = -1;
    if (rule.schema != nullptr) {
      if (const ColumnInfo* ci = rule.schema->column(col->name)) typmod = ci->typmod;
    }
    const std::size_t at = out.size();
    const ResolvedType& type =
        column_type(rule, static_cast<std::size_t>(col - image.data()), col->type_oid, typmod);
    if (!append_value(out, col->value, type, types_, value_opts_, err)) {
      err = "key column " + std::string(col->name) + ": " + err;
      return false;
    }
    if (header != nullptr) {
      append_connect_header_string(*header, col->name);
      header->push_back(':');
      append_connect_header_value(*header, std::string_view(out).substr(at), *col, type);
    }
  }
  out.push_back('}');
  if (header != nullptr) header->push_back('}');
  return any;
}

void EventRouter::append_connect_header_string(std::string& out, std::string_view text) {
  // Kafka Connect's Values#append of an embedded String: quoted, only `\` and `"` escaped.
  out.push_back('"');
  for (char ch : text) {
    if (ch == '\\' || ch == '"') out.push_back('\\');
    out.push_back(ch);
  }
  out.push_back('"');
}

void EventRouter::append_connect_header_value(std::string& out, std::string_view json_value,
                                              const decoder::Column& col,
                                              const ResolvedType& type) {
  // What Connect's SimpleHeaderConverter (Values#append) prints for the key field Debezium put in
  // the header: a Decimal (numeric(p,s)) as BigDecimal#toString, a string with only `\` and `"`
  // escaped (control and non-BMP characters raw), everything else as its JSON.
  const std::uint32_t base = type.base_oid;
  const std::int32_t typmod = type.value_typmod;  // a domain's when the column has none
  if (debezium_format() && value_opts_.decimal == DecimalHandling::kPrecise &&
      base == oid::kNumeric && typmod >= 4 && json_value.starts_with('"')) {
    scratch2_.clear();
    if (json::is_string_token(col.value)) {
      json::unescape_string(col.value, scratch2_);
    } else {
      scratch2_.assign(col.value);
    }
    append_big_decimal_text(out, scratch2_);
    return;
  }
  if (json::is_string_token(json_value)) {
    scratch2_.clear();
    if (json::unescape_string(json_value, scratch2_)) {
      append_connect_header_string(out, scratch2_);
      return;
    }
  }
  out.append(json_value);
}

void EventRouter::append_big_decimal_text(std::string& out, std::string_view text) {
  // java.math.BigDecimal#toString of PostgreSQL's numeric text (which has the column's scale):
  // plain when the adjusted exponent is at least -6, else `d.dddE-n`.
  const bool negative = text.starts_with('-');
  const std::string_view body = negative ? text.substr(1) : text;
  const auto dot = body.find('.');
  const std::size_t scale = dot == std::string_view::npos ? 0 : body.size() - dot - 1;
  std::string unscaled;
  for (char ch : body) {
    if (ch != '.') unscaled.push_back(ch);
  }
  const auto first = unscaled.find_first_not_of('0');
  unscaled = first == std::string::npos ? "0" : unscaled.substr(first);
  const long adjusted = static_cast<long>(unscaled.size()) - 1 - static_cast<long>(scale);
  if (adjusted >= -6 || unscaled == "0") {
    out.append(text);
    return;
  }
  if (negative) out.push_back('-');
  out.push_back(unscaled[0]);
  if (unscaled.size() > 1) {
    out.push_back('.');
    out.append(unscaled, 1);
  }
  out += "E" + std::to_string(adjusted);
}

}  // namespace walrelay::router
