#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace walrelay::router {

/// Well-known pg_type OIDs (src/include/catalog/pg_type.dat); stable across PostgreSQL versions.
namespace oid {
inline constexpr std::uint32_t kBool = 16;
inline constexpr std::uint32_t kBytea = 17;
inline constexpr std::uint32_t kChar = 18;
inline constexpr std::uint32_t kName = 19;
inline constexpr std::uint32_t kInt8 = 20;
inline constexpr std::uint32_t kInt2 = 21;
inline constexpr std::uint32_t kInt4 = 23;
inline constexpr std::uint32_t kText = 25;
inline constexpr std::uint32_t kOid = 26;
inline constexpr std::uint32_t kJson = 114;
inline constexpr std::uint32_t kPoint = 600;
inline constexpr std::uint32_t kFloat4 = 700;
inline constexpr std::uint32_t kFloat8 = 701;
inline constexpr std::uint32_t kMoney = 790;
inline constexpr std::uint32_t kBpchar = 1042;
inline constexpr std::uint32_t kVarchar = 1043;
inline constexpr std::uint32_t kDate = 1082;
inline constexpr std::uint32_t kTime = 1083;
inline constexpr std::uint32_t kTimestamp = 1114;
inline constexpr std::uint32_t kTimestamptz = 1184;
inline constexpr std::uint32_t kInterval = 1186;
inline constexpr std::uint32_t kTimetz = 1266;
inline constexpr std::uint32_t kBit = 1560;
inline constexpr std::uint32_t kVarbit = 1562;
inline constexpr std::uint32_t kNumeric = 1700;
inline constexpr std::uint32_t kUuid = 2950;
inline constexpr std::uint32_t kJsonb = 3802;
}  // namespace oid

/// What walrelay needs to know of a type to map its values (a pg_type row).
struct TypeInfo {
  std::uint32_t oid = 0;
  std::string name;     ///< format_type(oid, NULL), for messages
  char category = 'U';  ///< pg_type.typcategory ('A' array, 'E' enum, 'N' numeric, ...)
  char kind = 'b';  ///< pg_type.typtype ('b' base, 'd' domain, 'e' enum, 'c' composite, 'r' range)
  std::uint32_t element = 0;  ///< pg_type.typelem of an array type ('A'); 0 otherwise
  std::uint32_t base = 0;     ///< pg_type.typbasetype of a domain ('d'); 0 otherwise
  char delimiter = ',';       ///< pg_type.typdelim (array element separator; `;` for box)
  /// pg_type.typtypmod of a domain: the modifier of its base type (`numeric(12,3)` over numeric);
  /// -1 when none.
  std::int32_t base_typmod = -1;
};

/// OID → TypeInfo, filled from pg_type at start-up and when an unknown OID shows up.
/// Builtin types are known without a catalog query. Owned by the connector's thread.
class TypeRegistry {
 public:
  /// Starts with the builtin types listed in `oid` and their array types (category 'A', element
  /// set, delimiter ','), OIDs from pg_type.dat, checked against PostgreSQL 15's pg_type.
  TypeRegistry();

  /// Adds or replaces a type. A base type named `hstore` (the extension's, in any schema) becomes
  /// hstore_oid().
  void add(TypeInfo info);

  /// The OID of the hstore extension's type, 0 when not known (extension types have no fixed OID).
  [[nodiscard]] std::uint32_t hstore_oid() const { return hstore_oid_; }

  /// Counts the calls of `add`: what was looked up (e.g. a ResolvedType) at one generation may be
  /// out of date at another.
  [[nodiscard]] std::uint64_t generation() const { return generation_; }

  /// The type, or nullptr when unknown.
  [[nodiscard]] const TypeInfo* find(std::uint32_t type_oid) const;

  /// Follows domains to their base type (a domain over a domain too). Unknown OIDs come back
  /// unchanged; a domain whose base is unknown resolves to that base OID. A cycle (impossible in
  /// a real catalog) stops after as many hops as there are types, returning an OID on the cycle.
  [[nodiscard]] std::uint32_t resolve_domain(std::uint32_t type_oid) const;

  /// The type modifier a value of `type_oid` has when its column has none (atttypmod -1): for a
  /// domain, the first typtypmod along its chain (a domain over a domain over numeric(12,3) gives
  /// numeric(12,3)'s), as Debezium maps a domain column with its base type's length and scale.
  /// -1 for other types and unknown OIDs.
  [[nodiscard]] std::int32_t domain_typmod(std::uint32_t type_oid) const;

 private:
  std::unordered_map<std::uint32_t, TypeInfo> types_;
  std::uint32_t hstore_oid_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace walrelay::router
