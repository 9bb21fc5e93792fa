#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace walrelay::decoder {

/// How wal2json printed numeric values in the stream this token must match.
enum class NumericTokens : std::uint8_t {
  kNumbers,  ///< wal2json < 2.6 or the option off: digits as a JSON number, NaN/±Infinity → null
  kStrings,  ///< `numeric-data-types-as-string`: every numeric value as a JSON string
};

/// Appends the JSON token wal2json format-version 2 prints for one column value, given the value's
/// text from the type's output function (`text`, nullopt for SQL NULL) and the column's declared
/// type (`type_oid`, pg_attribute.atttypid: a domain keeps its own OID, as in wal2json, so a domain
/// over integer prints as a string). Mirrors `pg_decode_write_value` in wal2json.c:
/// int2/int4/int8/oid/float4/float8/numeric as a number (or a string, `numeric`), NaN/Infinity as
/// `null` (`kNumbers`), bool `t` as `true` and anything else as `false`, bytea without its `\x`
/// prefix as a string, every other type as a string escaped like PostgreSQL's escape_json.
///
/// Used for snapshot rows read with `SELECT`, so that a snapshot row and a streamed row of the same
/// data become byte-identical events. The text must come from a session with the settings the
/// replication connection pins (DateStyle, TimeZone, IntervalStyle, extra_float_digits,
/// bytea_output, lc_monetary). Returns false (appending nothing) when a numeric type's text is
/// not a number, where wal2json itself raises "is not a number".
bool append_wal2json_value(std::string& out, std::optional<std::string_view> text,
                           std::uint32_t type_oid, NumericTokens numerics);

}  // namespace walrelay::decoder
