#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "walrelay/config/config.hpp"
#include "walrelay/router/type_registry.hpp"

namespace walrelay::router {

/// How column values are written into events (config `events.value_format`; one definition, the
/// configuration's):
/// - kNative: a value means what PostgreSQL meant (docs/events.md "Value mapping"): numeric/money
///   as exact decimal strings, integers and floats as JSON numbers with their exact text,
///   booleans, json/jsonb as a JSON string holding the document's exact text, arrays as JSON
///   arrays, bytea as base64, date/time as ISO-8601 / RFC 3339 strings, interval as ISO-8601
///   duration, the rest as text.
/// - kDebezium: Debezium's default JSON types with schemas disabled (decimal.handling.mode=precise,
///   time.precision.mode=adaptive, binary.handling.mode=bytes), so Debezium consumers decode
///   walrelay's output unchanged.
using ValueFormat = config::ValueFormat;

/// Debezium's decimal.handling.mode for numeric and money in the debezium format
/// (config `events.decimal_handling`):
/// - kPrecise: Connect Decimal / VariableScaleDecimal (base64 bytes); NaN/±Infinity → null;
/// - kString: BigDecimal#toPlainString ("13.50"); "NAN", "POSITIVE_INFINITY", "NEGATIVE_INFINITY";
/// - kDouble: BigDecimal#doubleValue as Java prints it (13.5); "NaN", "Infinity", "-Infinity".
using DecimalHandling = config::DecimalHandling;

struct ValueMappingOptions {
  ValueFormat format = ValueFormat::kNative;
  DecimalHandling decimal = DecimalHandling::kPrecise;  ///< debezium format only
  /// json/jsonb columns embedded as JSON documents instead of JSON strings (native format only).
  bool json_as_document = false;
};

/// How a type's values are mapped (the rules listed at append_value), after following domains.
enum class ValueKind : std::uint8_t {
  kInt,          ///< int2, int4, int8, oid
  kFloat,        ///< float4, float8
  kNumeric,      ///< numeric
  kMoney,        ///< money
  kBool,         ///< bool
  kJson,         ///< json, jsonb
  kBytea,        ///< bytea
  kDate,         ///< date
  kTime,         ///< time
  kTimetz,       ///< timetz
  kTimestamp,    ///< timestamp
  kTimestamptz,  ///< timestamptz
  kInterval,     ///< interval
  kArray,        ///< an array type (category 'A' with an element type)
  kBits,         ///< bit, varbit
  kPoint,        ///< point
  kHstore,       ///< the hstore extension's type
  kText,         ///< everything else: the string token as it is
};

/// A column's type as append_value needs it, looked up in the TypeRegistry once: callers that map
/// many values of one column (the router, per table column) keep it and skip the registry's hash
/// lookups per value. Made by resolve_type; valid while `types.generation()` equals `generation`.
struct ResolvedType {
  std::uint32_t type_oid = 0;  ///< the column's declared type (as passed to resolve_type)
  std::int32_t typmod = -1;    ///< the column's atttypmod (as passed to resolve_type)
  ValueKind kind = ValueKind::kText;
  std::uint32_t base_oid = 0;      ///< type_oid with domains followed to their base type
  std::uint32_t element = 0;       ///< an array's element type (kArray); 0 otherwise
  std::int32_t value_typmod = -1;  ///< typmod, or a domain's base modifier when typmod is -1
  std::uint64_t generation = 0;    ///< TypeRegistry::generation() when resolved
};

/// Looks up `type_oid` (a column's declared type, `typmod` its atttypmod or -1) in `types` for
/// append_value. Unknown OIDs resolve to ValueKind::kText, as append_value treats them.
ResolvedType resolve_type(std::uint32_t type_oid, std::int32_t typmod, const TypeRegistry& types);

/// True when `t` was resolved from `type_oid` and `typmod` at the registry's current generation.
inline bool resolved_for(const ResolvedType& t, std::uint32_t type_oid, std::int32_t typmod,
                         const TypeRegistry& types) {
  return t.type_oid == type_oid && t.typmod == typmod && t.generation == types.generation() &&
         t.generation != 0;
}

/// Appends the JSON for one column value to `out`.
///
/// Native format (ValueFormat::kNative), per type after resolving domains to their base type:
///   int2/int4/int8/oid   the number token unchanged (exact digits). A string token holding an
///                        integer (numeric-data-types-as-string) becomes the bare number.
///   float4/float8        the number token unchanged (exact digits, `-0` kept); "NaN",
///                        "Infinity", "-Infinity" as JSON strings.
///   numeric              the exact digits as a JSON string: `"12345678901234567890.123456789"`,
///                        `"1500.000000000"`; "NaN"/"Infinity"/"-Infinity" kept as strings.
///   money                exact decimal string without symbol and grouping (`$1,234.50` ->
///                        `"1234.50"`, `-$0.01` -> `"-0.01"`); never through a double.
///   bool                 true / false.
///   json/jsonb           the JSON string token unchanged (a document `null` stays the string
///                        "null", distinct from SQL NULL). With json_as_document the unescaped
///                        document text is embedded as raw JSON, without re-parsing (a document
///                        `null` then reads like SQL NULL: the caller's choice).
///   arrays               a JSON array built by a PostgreSQL array-literal parser (quoted elements
///                        with backslash escapes; unquoted NULL -> null, quoted "NULL" -> string;
///                        `{}` -> []; nested dimensions -> nested arrays; the element type's
///                        typdelim as separator), each element mapped by the element type. A
///                        literal with a dimension decoration (`[0:2]={7,8,9}`, lower bound other
///                        than 1) or one that is not a brace literal (int2vector) is emitted as its
///                        PostgreSQL text in a JSON string, so the bound is never lost silently.
///   bytea                `\x...` hex (or escape format) -> standard base64 string.
///   date, time, timetz,  PostgreSQL's ISO text unchanged (`2024-03-10`, `06:30:00`,
///   interval             `06:30:00+02`, `P1DT2H3M4.5S`), including `infinity` and BC dates.
///   timestamp            `2024-03-10 06:30:00.12` -> `"2024-03-10T06:30:00.12"`.
///   timestamptz          `2024-03-10 06:30:00.12+00` -> `"2024-03-10T06:30:00.12Z"`; other offsets
///                        as `+HH:MM` (`+HH:MM:SS` when the offset has seconds). `infinity`,
///                        `-infinity` and BC values (`... BC`) keep PostgreSQL's text.
///   anything else        the string token unchanged (text, varchar, bpchar, name, char, uuid,
///                        inet, enums, ranges, geometric, composite, xml, unknown OIDs).
///
/// Debezium format (ValueFormat::kDebezium) mirrors Debezium's PostgreSQL connector
/// (io.debezium.connector.postgresql.PostgresValueConverter) with Kafka Connect's JsonConverter,
/// schemas.enable=false, decimal.format=BASE64:
///   int/oid/float/bool   as native (INT16/INT32/INT64, FLOAT32/FLOAT64, BOOLEAN).
///   numeric(p,s)         org.apache.kafka.connect.data.Decimal, scale s: JSON string of the
///                        base64 of the unscaled value's minimal big-endian two's complement
///                        (BigInteger#toByteArray), e.g. 1500.000000000 at scale 9 -> unscaled
///                        1500000000000 = 0x015D3EF79800 -> "AV0+95gA".
///   numeric              io.debezium.data.VariableScaleDecimal {"scale":s,"value":"<base64>"},
///                        trailing fraction zeros stripped first (convertDecimal calls
///                        BigDecimal#stripTrailingZeros), so s = significant fraction digits.
///                        NaN/±Infinity: Debezium fails the connector (SpecialValueDecimal throws
///                        in precise mode); walrelay emits null.
///   money                Decimal with scale 2 (money.fraction.digits default), base64.
///   bytea                base64 string (binary.handling.mode=bytes through JsonConverter).
///   date                 io.debezium.time.Date: int days since 1970-01-01 (BC dates proleptic,
///                        0044-03-15 BC = year -43). `infinity` / `-infinity` become Debezium's
///                        sentinels -2147472692 / -2147472691 (epoch days of its
///                        POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE, -5877611-06-21 / -06-22; yes,
///                        +infinity is the smaller number there too).
///   time(p)              p <= 3: io.debezium.time.Time (int ms of day); p > 3 or typmod -1
///                        (precision 6): io.debezium.time.MicroTime (int µs). `24:00:00` is a day.
///   timetz               io.debezium.time.ZonedTime: shifted to UTC, ISO_OFFSET_TIME
///                        (`06:30:00+02` -> `"04:30:00Z"`, fraction without trailing zeros).
///   timestamp(p)         p <= 3: io.debezium.time.Timestamp (epoch ms); else MicroTimestamp
///                        (epoch µs). infinity / -infinity: Debezium's sentinels
///                        9223372036825200000 / -9223372036832400000 µs (pgjdbc
///                        PGStatement.DATE_POSITIVE/NEGATIVE_INFINITY), /1000 in ms. Values
///                        beyond int64 (µs since 1970 ends in 294247 AD) -> null.
///   timestamptz(p)       io.debezium.time.ZonedTimestamp in UTC with exactly p fraction digits
///                        (typmod -1 -> 6), as Debezium >= 2.2 formats it (DBZ-5996):
///                        `"2024-03-10T06:30:00.120000Z"`; p = 0: no fraction. `infinity` /
///                        `-infinity` stay strings; BC years print as `-0043-...`.
///   interval             io.debezium.time.MicroDuration: int64 µs, Debezium's approximation
///                        MicroDuration#durationMicros with 365.25/12 days per month.
///   json/jsonb, uuid,    strings (io.debezium.data.Json, io.debezium.data.Uuid, enums, text).
///   text-like, enums
///   arrays               JSON arrays of the element mapping (dimension-decorated literals: text).
///
/// `token` is the raw wal2json token for the value (see decoder::Column::value; printed with the
/// pinned session settings DateStyle ISO, TimeZone UTC, IntervalStyle iso_8601,
/// extra_float_digits 3, bytea_output hex, lc_monetary C). `type_oid` is the column's type OID
/// from wal2json, `typmod` the column's pg_attribute.atttypmod (-1 when unknown), `types` resolves
/// domains, arrays and user types. SQL NULL (`null`) always becomes JSON `null`. For a column of
/// a domain over numeric(p,s), atttypmod is -1: pass the domain's pg_type.typtypmod to get a
/// Decimal rather than a VariableScaleDecimal in the Debezium format. An array column's typmod
/// applies to its elements (numeric(10,2)[]).
///
/// The work happens in `out` and in thread_local scratch buffers: no allocation per call once
/// the buffers have grown (except when building `error`).
///
/// Returns false and sets `error` (naming the type and the text) when the token does not have the
/// shape the type promises; `out` may then hold a partial value and must be discarded.
bool append_value(std::string& out, std::string_view token, std::uint32_t type_oid,
                  std::int32_t typmod, const TypeRegistry& types, const ValueMappingOptions& opts,
                  std::string& error);

/// append_value with the column's type already resolved (resolve_type, same registry): the same
/// output, without looking the type up again.
bool append_value(std::string& out, std::string_view token, const ResolvedType& type,
                  const TypeRegistry& types, const ValueMappingOptions& opts, std::string& error);

}  // namespace walrelay::router
