#pragma once
// Internal to walrelay_router: values Debezium's PostgreSQL connector maps structurally, written as
// Kafka Connect's JsonConverter (schemas disabled) prints them. Each function appends one JSON
// value to `out` and returns false (appending nothing usable) when `text` is not the PostgreSQL
// output it expects.

#include <cstdint>
#include <string>
#include <string_view>

namespace walrelay::router::detail {

/// A double as Java's Double.toString prints it (Jackson's writeNumber(double), JDK 19+ algorithm:
/// the shortest decimal that rounds to `v`, at least two digits when one would do, picking the
/// closest): `1.0`, `-0.0`, `0.001`, `1234567.0`, `1.0E7`, `1.0E21`, `4.9E-324`; plain notation
/// for 1e-3 ≤ |v| < 1e7, else `d.dddE±n`. NaN and infinities are the strings "NaN", "Infinity",
/// "-Infinity" (Jackson's QUOTE_NON_NUMERIC_NUMBERS).
void append_java_double(std::string& out, double v);

/// The same for a float (Java's Float.toString): `1.4E-45` for the smallest float.
void append_java_float(std::string& out, float v);

/// A float4/float8 number token (PostgreSQL's shortest exact text, e.g. `1e+21`, `-0`) as Java
/// prints the same value. `single` = float4. False when `text` is not a number.
bool append_java_number(std::string& out, std::string_view text, bool single);

/// bit(n)/varbit text (`10100101`) as Debezium's io.debezium.data.Bits: base64 of the bytes of a
/// java.util.BitSet with bit i = the i-th character from the right, little-endian and without
/// trailing zero bytes (B'0000' → ""), per PostgresValueConverter#convertBits. A column of length 1
/// (bit, bit(1), varbit(1): `length` is the typmod) is a boolean instead.
bool append_debezium_bits(std::string& out, std::string_view text, std::int32_t length);

/// point text `(x,y)` as Debezium's io.debezium.data.geometry.Point struct:
/// `{"x":1.5,"y":-2.0,"wkb":"<base64 of the 21-byte little-endian OGC WKB point>","srid":null}`.
bool append_debezium_point(std::string& out, std::string_view text);

/// hstore text (`"a"=>"1", "b c"=>NULL`) as Debezium's hstore.handling.mode=json: a JSON string
/// holding a JSON object, in the iteration order of the java.util.HashMap PgJDBC's
/// HStoreConverter.fromString fills (String.hashCode buckets, insertion order within one), which
/// is what Debezium prints.
bool append_hstore_json(std::string& out, std::string_view text);

}  // namespace walrelay::router::detail
