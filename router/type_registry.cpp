#include "walrelay/router/type_registry.hpp"

#include <utility>

namespace walrelay::router {

namespace {

struct Builtin {
  std::uint32_t oid;
  const char* name;
  char category;
  std::uint32_t array_oid;  ///< pg_type.typarray of the type (0 when it has none)
};

// OIDs, categories and array types from PostgreSQL's src/include/catalog/pg_type.dat (stable
// since 8.x); checked against `SELECT oid, typname, typcategory, typarray FROM pg_type` on
// PostgreSQL 15. All of these types use ',' as typdelim.
constexpr Builtin kBuiltins[] = {
    {oid::kBool, "boolean", 'B', 1000},
    {oid::kBytea, "bytea", 'U', 1001},
    {oid::kChar, "\"char\"", 'Z', 1002},
    {oid::kName, "name", 'S', 1003},
    {oid::kInt8, "bigint", 'N', 1016},
    {oid::kInt2, "smallint", 'N', 1005},
    {oid::kInt4, "integer", 'N', 1007},
    {oid::kText, "text", 'S', 1009},
    {oid::kOid, "oid", 'N', 1028},
    {oid::kJson, "json", 'U', 199},
    {oid::kFloat4, "real", 'N', 1021},
    {oid::kFloat8, "double precision", 'N', 1022},
    {oid::kMoney, "money", 'N', 791},
    {oid::kBpchar, "character", 'S', 1014},
    {oid::kVarchar, "character varying", 'S', 1015},
    {oid::kDate, "date", 'D', 1182},
    {oid::kTime, "time without time zone", 'D', 1183},
    {oid::kTimestamp, "timestamp without time zone", 'D', 1115},
    {oid::kTimestamptz, "timestamp with time zone", 'D', 1185},
    {oid::kInterval, "interval", 'T', 1187},
    {oid::kTimetz, "time with time zone", 'D', 1270},
    {oid::kNumeric, "numeric", 'N', 1231},
    {oid::kUuid, "uuid", 'U', 2951},
    {oid::kJsonb, "jsonb", 'U', 3807},
    {oid::kBit, "bit", 'V', 1561},
    {oid::kVarbit, "bit varying", 'V', 1563},
    {oid::kPoint, "point", 'G', 1017},
};

}  // namespace

TypeRegistry::TypeRegistry() {
  types_.reserve(2 * std::size(kBuiltins));
  for (const auto& b : kBuiltins) {
    TypeInfo t;
    t.oid = b.oid;
    t.name = b.name;
    t.category = b.category;
    t.kind = 'b';
    add(std::move(t));

    TypeInfo a;
    a.oid = b.array_oid;
    a.name = std::string(b.name) + "[]";
    a.category = 'A';
    a.kind = 'b';
    a.element = b.oid;
    add(std::move(a));
  }
}

void TypeRegistry::add(TypeInfo info) {
  const auto key = info.oid;
  const std::string_view name = info.name;
  if (info.kind == 'b' && (name == "hstore" || name.ends_with(".hstore"))) hstore_oid_ = key;
  types_.insert_or_assign(key, std::move(info));
  ++generation_;
}

const TypeInfo* TypeRegistry::find(std::uint32_t type_oid) const {
  const auto it = types_.find(type_oid);
  return it == types_.end() ? nullptr : &it->second;
}

std::uint32_t TypeRegistry::resolve_domain(std::uint32_t type_oid) const {
  // A domain chain is short (PostgreSQL forbids cycles); the bound only guards against a
  // registry filled with inconsistent rows. On a cycle the last OID reached is returned.
  std::uint32_t current = type_oid;
  for (std::size_t hops = 0; hops <= types_.size(); ++hops) {
    const TypeInfo* t = find(current);
    if (t == nullptr || t->kind != 'd' || t->base == 0) return current;
    current = t->base;
  }
  return current;
}

std::int32_t TypeRegistry::domain_typmod(std::uint32_t type_oid) const {
  std::uint32_t current = type_oid;
  for (std::size_t hops = 0; hops <= types_.size(); ++hops) {
    const TypeInfo* t = find(current);
    if (t == nullptr || t->kind != 'd' || t->base == 0) return -1;
    if (t->base_typmod >= 0) return t->base_typmod;
    current = t->base;
  }
  return -1;
}

}  // namespace walrelay::router
