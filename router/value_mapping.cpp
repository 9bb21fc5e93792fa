// Column value mapping: wal2json token (PostgreSQL text output) -> JSON for walrelay's native
// format or for Debezium's default JSON encoding. The rules and their sources are documented in
// walrelay/router/value_mapping.hpp; the comments here cite the code each rule mirrors.

#include "walrelay/router/value_mapping.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "base64.hpp"
#include "debezium_types.hpp"
#include "value_mapping_internal.hpp"
#include "value_text.hpp"
#include "walrelay/core/json.hpp"

namespace walrelay::router {

namespace values {

namespace {

/// Scratch buffers reused across calls (the mapping runs on the connector's thread; thread_local
/// keeps it safe anyway). None of them is held across a call that uses the same buffer.
thread_local std::string tl_text;    // top-level unescaped token
thread_local std::string tl_digits;  // unscaled decimal digits

}  // namespace

// ------------------------------------------------------------------------------------------------
// Type classification

Resolved classify(std::uint32_t type_oid, const TypeRegistry& types) {
  Resolved r;
  r.oid = types.resolve_domain(type_oid);
  switch (r.oid) {
    case oid::kInt2:
    case oid::kInt4:
    case oid::kInt8:
    case oid::kOid:
      r.kind = Kind::kInt;
      return r;
    case oid::kFloat4:
    case oid::kFloat8:
      r.kind = Kind::kFloat;
      return r;
    case oid::kNumeric:
      r.kind = Kind::kNumeric;
      return r;
    case oid::kMoney:
      r.kind = Kind::kMoney;
      return r;
    case oid::kBool:
      r.kind = Kind::kBool;
      return r;
    case oid::kJson:
    case oid::kJsonb:
      r.kind = Kind::kJson;
      return r;
    case oid::kBytea:
      r.kind = Kind::kBytea;
      return r;
    case oid::kDate:
      r.kind = Kind::kDate;
      return r;
    case oid::kTime:
      r.kind = Kind::kTime;
      return r;
    case oid::kTimetz:
      r.kind = Kind::kTimetz;
      return r;
    case oid::kTimestamp:
      r.kind = Kind::kTimestamp;
      return r;
    case oid::kTimestamptz:
      r.kind = Kind::kTimestamptz;
      return r;
    case oid::kInterval:
      r.kind = Kind::kInterval;
      return r;
    case oid::kBit:
    case oid::kVarbit:
      r.kind = Kind::kBits;
      return r;
    case oid::kPoint:
      r.kind = Kind::kPoint;
      return r;
    default:
      break;
  }
  if (r.oid == types.hstore_oid() && r.oid != 0) {
    r.kind = Kind::kHstore;
    return r;
  }
  if (const TypeInfo* t = types.find(r.oid);
      t != nullptr && t->category == 'A' && t->element != 0) {
    r.kind = Kind::kArray;
    r.element = t->element;
  }
  return r;
}

bool fail(Ctx& ctx, std::uint32_t type_oid, std::string_view text, std::string_view why) {
  ctx.error.clear();
  ctx.error += "cannot map value ";
  json::append_string(ctx.error, text.substr(0, 200));
  if (text.size() > 200) ctx.error += "...";
  ctx.error += " of type ";
  if (const TypeInfo* t = ctx.types.find(type_oid); t != nullptr && !t->name.empty()) {
    ctx.error += t->name;
    ctx.error += " (oid ";
    append_int(ctx.error, type_oid);
    ctx.error += ')';
  } else {
    ctx.error += "oid ";
    append_int(ctx.error, type_oid);
  }
  if (type_oid != ctx.type_oid) {
    // An array element or a domain: name the column's declared type too.
    ctx.error += " in ";
    if (const TypeInfo* t = ctx.types.find(ctx.type_oid); t != nullptr && !t->name.empty()) {
      ctx.error += t->name;
      ctx.error += " (oid ";
      append_int(ctx.error, ctx.type_oid);
      ctx.error += ')';
    } else {
      ctx.error += "oid ";
      append_int(ctx.error, ctx.type_oid);
    }
  }
  ctx.error += ": ";
  ctx.error += why;
  return false;
}

namespace {

// ------------------------------------------------------------------------------------------------
// Scalars. `text` is the value's PostgreSQL text (unescaped); `bare` when wal2json printed it as a
// bare JSON token (numbers, true/false) rather than a string.

bool map_numeric(std::string& out, std::string_view text, std::int32_t typmod, Ctx& ctx,
                 std::uint32_t oid_for_error) {
  const bool debezium = ctx.opts.format == ValueFormat::kDebezium;
  if (debezium && ctx.opts.decimal == DecimalHandling::kString) {
    // SpecialValueDecimal#fromLogical in string mode: toPlainString() (PostgreSQL's numeric text is
    // plain and has the value's scale) or the special value's name.
    if (text == "NaN") {
      out += "\"NAN\"";
    } else if (text == "Infinity") {
      out += "\"POSITIVE_INFINITY\"";
    } else if (text == "-Infinity") {
      out += "\"NEGATIVE_INFINITY\"";
    } else {
      Decimal d;
      if (!parse_decimal(text, d)) return fail(ctx, oid_for_error, text, "not a decimal number");
      json::append_string(out, text);
    }
    return true;
  }
  if (debezium && ctx.opts.decimal == DecimalHandling::kDouble) {
    // BigDecimal#doubleValue (correctly rounded), printed as Java does; NaN/±Infinity as Jackson
    // writes non-finite doubles.
    if (!is_special_float(text)) {
      Decimal d;
      if (!parse_decimal(text, d)) return fail(ctx, oid_for_error, text, "not a decimal number");
    }
    if (!detail::append_java_number(out, text == "NaN" ? "nan" : text, false))
      return fail(ctx, oid_for_error, text, "not a decimal number");
    return true;
  }
  if (is_special_float(text)) {
    if (debezium) {
      // Debezium (decimal.handling.mode=precise) cannot express NaN/±Infinity in a Decimal: it
      // logs a warning and publishes null (seen with Debezium 3.6.1); walrelay does the same.
      out += "null";
    } else {
      json::append_string(out, text);
    }
    return true;
  }
  Decimal d;
  if (!parse_decimal(text, d)) return fail(ctx, oid_for_error, text, "not a decimal number");
  if (!debezium) {
    out.push_back('"');
    out.append(text);
    out.push_back('"');
    return true;
  }
  if (typmod >= 4) {
    // numeric(p,s) -> org.apache.kafka.connect.data.Decimal with scale s: BigDecimal#setScale(s)
    // (PostgresValueConverter#withScaleAdjustedIfNeeded) then Decimal#fromLogical =
    // unscaledValue().toByteArray(), base64 by JsonConverter (decimal.format=BASE64 default).
    if (!unscaled_digits(d, numeric_typmod_scale(typmod), tl_digits))
      return fail(ctx, oid_for_error, text, "more fraction digits than the column's scale");
    append_twos_complement_base64(out, d.negative, tl_digits);
    return true;
  }
  // numeric without typmod -> io.debezium.data.VariableScaleDecimal struct {scale, value}:
  // PostgresValueConverter#convertDecimal strips trailing zeros (stripTrailingZeros, then
  // setScale(0) if the scale went negative), so the scale is the count of significant fraction
  // digits.
  std::string_view frac = d.frac_digits;
  while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
  Decimal stripped = d;
  stripped.frac_digits = frac;
  unscaled_digits(stripped, static_cast<int>(frac.size()), tl_digits);
  out += "{\"scale\":";
  append_int(out, static_cast<std::int64_t>(frac.size()));
  out += ",\"value\":";
  append_twos_complement_base64(out, d.negative, tl_digits);
  out.push_back('}');
  return true;
}

bool map_money(std::string& out, std::string_view text, Ctx& ctx, std::uint32_t oid_for_error) {
  thread_local std::string canon;
  Decimal d;
  if (!parse_money(text, canon) || !parse_decimal(canon, d))
    return fail(ctx, oid_for_error, text, "not a money amount");
  if (ctx.opts.format == ValueFormat::kNative) {
    json::append_string(out, canon);
    return true;
  }
  // Debezium convertMoney: string mode toPlainString of the scale-2 amount, double mode
  // doubleValue() as Java prints it.
  if (ctx.opts.decimal == DecimalHandling::kString ||
      ctx.opts.decimal == DecimalHandling::kDouble) {
    if (!unscaled_digits(d, 2, tl_digits))
      return fail(ctx, oid_for_error, text, "more than 2 fraction digits");
    std::string plain = d.negative ? "-" : "";
    plain.append(d.int_digits.empty() ? std::string_view("0") : d.int_digits);
    plain.push_back('.');
    plain.append(d.frac_digits);
    plain.append(2 - std::min<std::size_t>(2, d.frac_digits.size()), '0');
    if (ctx.opts.decimal == DecimalHandling::kString) {
      json::append_string(out, plain);
    } else if (!detail::append_java_number(out, plain, false)) {
      return fail(ctx, oid_for_error, text, "not a money amount");
    }
    return true;
  }
  // Debezium: PostgresValueConverter#moneySchema = Decimal.builder(money.fraction.digits = 2),
  // convertMoney sets the scale to 2 -> base64 of the unscaled two's complement.
  if (!unscaled_digits(d, 2, tl_digits))
    return fail(ctx, oid_for_error, text, "more than 2 fraction digits");
  append_twos_complement_base64(out, d.negative, tl_digits);
  return true;
}

bool map_timestamp(std::string& out, std::string_view text, bool with_zone, std::int32_t typmod,
                   Ctx& ctx, std::uint32_t oid_for_error) {
  const bool debezium = ctx.opts.format == ValueFormat::kDebezium;
  if (text == "infinity" || text == "-infinity") {
    if (!debezium || with_zone) {
      // Native: PostgreSQL's text. Debezium timestamptz: PostgresValueConverter
      // #convertTimestampWithZone returns the strings "infinity" / "-infinity".
      json::append_string(out, text);
      return true;
    }
    // Debezium timestamp: POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE_TIME, built from pgjdbc's
    // PGStatement.DATE_POSITIVE_INFINITY = 9223372036825200000 and DATE_NEGATIVE_INFINITY =
    // -9223372036832400000 read as microseconds since the epoch.
    const bool pos = text[0] == 'i';
    const int precision = typmod < 0 ? 6 : typmod;
    if (precision <= 3) {
      out += pos ? "9223372036825200" : "-9223372036832400";
    } else {
      out += pos ? "9223372036825200000" : "-9223372036832400000";
    }
    return true;
  }
  TimestampParts t;
  if (!parse_timestamp(text, with_zone, t))
    return fail(ctx, oid_for_error, text, "not an ISO timestamp");
  const std::int64_t days = t.days;
  const std::int64_t tod = t.tod;

  if (!debezium) {
    if (t.bc) {
      // No ISO 8601 form that every consumer agrees on for BC; keep PostgreSQL's text.
      json::append_string(out, text);
      return true;
    }
    // "YYYY-MM-DD HH:MM:SS[.f]" -> "YYYY-MM-DDTHH:MM:SS[.f]" (+ "Z" / "+HH:MM[:SS]").
    char buf[16];
    char* p = buf;
    if (with_zone) {
      if (t.offset == 0) {
        *p++ = 'Z';
      } else {
        const std::int64_t a = t.offset < 0 ? -t.offset : t.offset;
        *p++ = t.offset < 0 ? '-' : '+';
        p = put_2digits(p, a / 3600);
        *p++ = ':';
        p = put_2digits(p, a / 60 % 60);
        if (a % 60 != 0) {
          *p++ = ':';
          p = put_2digits(p, a % 60);
        }
      }
    }
    *p++ = '"';
    out.push_back('"');
    out.append(t.date);
    out.push_back('T');
    out.append(t.clock);
    out.append(buf, static_cast<std::size_t>(p - buf));
    return true;
  }

  const int precision = typmod < 0 ? 6 : typmod;
  if (!with_zone) {
    // time.precision.mode=adaptive (JdbcValueConverters): timestamp(0..3) -> io.debezium.time.
    // Timestamp (epoch ms), timestamp(4..6) and unspecified -> MicroTimestamp (epoch µs).
    const std::int64_t per_day = precision <= 3 ? kMicrosPerDay / 1000 : kMicrosPerDay;
    const std::int64_t in_day = precision <= 3 ? tod / 1000 : tod;
    std::int64_t v = 0;
    if (__builtin_mul_overflow(days, per_day, &v) || __builtin_add_overflow(v, in_day, &v)) {
      // Beyond int64 µs since 1970 (PostgreSQL's range ends in 294276 AD, past 2^63 µs from
      // 1970): not representable, emitted as null.
      out += "null";
      return true;
    }
    append_int(out, v);
    return true;
  }
  // timestamptz -> io.debezium.time.ZonedTimestamp in UTC. ZonedTimestamp#toIsoString with the
  // column's precision as fractional width (DBZ-5996, Debezium >= 2.2): exactly p digits for
  // 1 <= p <= 9, ISO_OFFSET_DATE_TIME (no fraction when zero) for p = 0. Years beyond 9999 get
  // a '+' and BC years a '-' (ISO_LOCAL_DATE, SignStyle.EXCEEDS_PAD).
  const Civil c = civil_from_days(days);
  char buf[64];
  char* p = buf;
  *p++ = '"';
  if (c.year > 9999) *p++ = '+';
  if (c.year < 0) *p++ = '-';
  const std::int64_t year = c.year < 0 ? -c.year : c.year;
  if (year < 1000) {
    // Zero padded to four digits.
    for (std::int64_t scale = 1000; scale > 1 && year < scale; scale /= 10) *p++ = '0';
  }
  p = std::to_chars(p, buf + 24, year).ptr;
  *p++ = '-';
  p = put_2digits(p, c.month);
  *p++ = '-';
  p = put_2digits(p, c.day);
  *p++ = 'T';
  p = put_clock(p, tod, precision);
  *p++ = 'Z';
  *p++ = '"';
  out.append(buf, static_cast<std::size_t>(p - buf));
  return true;
}

bool map_interval(std::string& out, std::string_view text, Ctx& ctx, std::uint32_t oid_for_error) {
  if (ctx.opts.format == ValueFormat::kNative) {
    json::append_string(out, text);
    return true;
  }
  // IntervalStyle iso_8601 output (src/backend/utils/adt/datetime.c EncodeInterval):
  // P[nY][nM][nD][T[nH][nM][n[.f]S]], every field signed on its own, "PT0S" for zero.
  std::string_view s = text;
  if (s.size() < 2 || s[0] != 'P')
    return fail(ctx, oid_for_error, text, "not an ISO 8601 interval");
  s.remove_prefix(1);
  std::int64_t years = 0, months = 0, days = 0, hours = 0, minutes = 0;
  std::int64_t whole_seconds = 0, micros = 0;
  bool time_part = false;
  bool any = false;
  while (!s.empty()) {
    if (s[0] == 'T') {
      if (time_part) return fail(ctx, oid_for_error, text, "not an ISO 8601 interval");
      time_part = true;
      s.remove_prefix(1);
      continue;
    }
    bool neg = false;
    if (s[0] == '-' || s[0] == '+') {
      neg = s[0] == '-';
      s.remove_prefix(1);
    }
    std::size_t i = 0;
    while (i < s.size() && is_digit(s[i])) ++i;
    std::int64_t n = 0;
    if (!parse_uint(s.substr(0, i), n)) return fail(ctx, oid_for_error, text, "bad interval field");
    std::int64_t frac = 0;
    bool has_frac = false;
    if (i < s.size() && s[i] == '.') {
      const std::size_t start = ++i;
      while (i < s.size() && is_digit(s[i])) ++i;
      const std::string_view f = s.substr(start, i - start);
      if (f.empty() || f.size() > 6) return fail(ctx, oid_for_error, text, "bad interval field");
      for (char c : f) frac = frac * 10 + (c - '0');
      for (std::size_t k = f.size(); k < 6; ++k) frac *= 10;
      has_frac = true;
    }
    if (i >= s.size()) return fail(ctx, oid_for_error, text, "bad interval field");
    const char unit = s[i];
    s.remove_prefix(i + 1);
    const std::int64_t v = neg ? -n : n;
    if (has_frac && !(time_part && unit == 'S'))
      return fail(ctx, oid_for_error, text, "fraction only allowed on seconds");
    if (!time_part && unit == 'Y') {
      years = v;
    } else if (!time_part && unit == 'M') {
      months = v;
    } else if (!time_part && unit == 'D') {
      days = v;
    } else if (time_part && unit == 'H') {
      hours = v;
    } else if (time_part && unit == 'M') {
      minutes = v;
    } else if (time_part && unit == 'S') {
      whole_seconds = v;
      micros = neg ? -frac : frac;
    } else {
      return fail(ctx, oid_for_error, text, "bad interval unit");
    }
    any = true;
  }
  if (!any) return fail(ctx, oid_for_error, text, "empty interval");
  // io.debezium.time.MicroDuration (interval.handling.mode=numeric): PostgresValueConverter
  // #convertInterval calls MicroDuration#durationMicros(years, months, days, hours, minutes,
  // seconds, DAYS_PER_MONTH_AVG = 365.25 / 12), which computes in double:
  //   numberOfDays = (years * 12 + months) * daysPerMonthAvg + days
  //   numberOfSeconds = ((numberOfDays * 24 + hours) * 60 + minutes) * 60 + seconds
  //   return (long) (numberOfSeconds * 1e6)
  // with seconds = PGInterval#getSeconds() = wholeSeconds + microSeconds / 1e6. The same double
  // operations in the same order give the same result; (long) saturates like Java's cast.
  constexpr double kDaysPerMonthAvg = 365.25 / 12.0;
  const double seconds =
      static_cast<double>(whole_seconds) + static_cast<double>(micros) / 1'000'000.0;
  const double number_of_days =
      static_cast<double>(years * 12 + months) * kDaysPerMonthAvg + static_cast<double>(days);
  const double number_of_seconds =
      ((number_of_days * 24 + static_cast<double>(hours)) * 60 + static_cast<double>(minutes)) *
          60 +
      seconds;
  const double us = number_of_seconds * 1e6;
  std::int64_t result = 0;
  if (us != us) {
    result = 0;
  } else if (us >= 9223372036854775807.0) {
    result = std::numeric_limits<std::int64_t>::max();
  } else if (us <= -9223372036854775808.0) {
    result = std::numeric_limits<std::int64_t>::min();
  } else {
    result = static_cast<std::int64_t>(us);
  }
  append_int(out, result);
  return true;
}

}  // namespace

bool map_scalar(std::string& out, std::string_view text, bool bare, const Resolved& r,
                std::int32_t typmod, Ctx& ctx) {
  const bool debezium = ctx.opts.format == ValueFormat::kDebezium;
  switch (r.kind) {
    case Kind::kInt:
      // int2/int4/int8/oid: JSON number with the exact digits (Debezium INT16/INT32/INT64).
      if (!is_json_number(text, true)) return fail(ctx, r.oid, text, "not an integer");
      out.append(text);
      return true;
    case Kind::kFloat:
      // float4/float8: native keeps the exact text (extra_float_digits 3 prints the shortest
      // exact form, -0 kept); debezium prints the same value as Java's Float/Double.toString
      // (`1.0`, `-0.0`, `1.0E21`), as Jackson does for JsonConverter. NaN/±Infinity are not JSON
      // numbers: JSON strings, as Jackson writes them (QUOTE_NON_NUMERIC_NUMBERS).
      if (is_json_number(text, false)) {
        if (!debezium) {
          out.append(text);
        } else if (!detail::append_java_number(out, text, r.oid == oid::kFloat4)) {
          return fail(ctx, r.oid, text, "not a floating-point number");
        }
      } else if (!bare && is_special_float(text)) {
        json::append_string(out, text);
      } else {
        return fail(ctx, r.oid, text, "not a floating-point number");
      }
      return true;
    case Kind::kNumeric:
      return map_numeric(out, text, typmod, ctx, r.oid);
    case Kind::kMoney:
      return map_money(out, text, ctx, r.oid);
    case Kind::kBool:
      if (text == "true" || text == "t") {
        out += "true";
      } else if (text == "false" || text == "f") {
        out += "false";
      } else {
        return fail(ctx, r.oid, text, "not a boolean");
      }
      return true;
    case Kind::kJson:
      if (!debezium && ctx.opts.json_as_document) {
        out.append(text);
      } else {
        json::append_string(out, text);  // io.debezium.data.Json is a STRING
      }
      return true;
    case Kind::kBytea:
      // Native: base64. Debezium binary.handling.mode=bytes: BYTES, base64 by JsonConverter.
      if (!append_bytea_base64(out, text)) return fail(ctx, r.oid, text, "not bytea hex text");
      return true;
    case Kind::kDate: {
      if (!debezium) {
        json::append_string(out, text);
        return true;
      }
      if (text == "infinity" || text == "-infinity") {
        // Debezium: DateTimeFormat#date maps them to PostgresValueConverter.POSITIVE_INFINITY_
        // LOCAL_DATE = -5877611-06-21 and NEGATIVE_INFINITY_LOCAL_DATE = -5877611-06-22, then
        // io.debezium.time.Date#toEpochDay.
        append_int(out, text[0] == 'i' ? days_from_civil(-5877611, 6, 21)
                                       : days_from_civil(-5877611, 6, 22));
        return true;
      }
      std::int64_t days = 0;
      if (!parse_date(text, days)) return fail(ctx, r.oid, text, "not an ISO date");
      append_int(out, days);  // io.debezium.time.Date: INT32 days since the epoch
      return true;
    }
    case Kind::kTime: {
      std::string_view s = text;
      std::int64_t micros = 0;
      if (!parse_time_part(s, micros) || !s.empty())
        return fail(ctx, r.oid, text, "not an ISO time");
      if (!debezium) {
        json::append_string(out, text);
        return true;
      }
      // adaptive: time(0..3) -> io.debezium.time.Time (INT32 ms of day), else MicroTime (INT64
      // µs); 24:00:00 arrives as a java.time.Duration (Strings#asDuration) = a full day.
      const int precision = typmod < 0 ? 6 : typmod;
      append_int(out, precision <= 3 ? micros / 1000 : micros);
      return true;
    }
    case Kind::kTimetz: {
      std::string_view s = text;
      std::int64_t micros = 0;
      std::int64_t offset = 0;
      if (!parse_time_part(s, micros) || !parse_offset(s, offset) || !s.empty())
        return fail(ctx, r.oid, text, "not an ISO time with time zone");
      if (!debezium) {
        json::append_string(out, text);
        return true;
      }
      // io.debezium.time.ZonedTime: OffsetTime#withOffsetSameInstant(UTC) formatted with
      // ISO_OFFSET_TIME ("HH:mm:ss[.fraction]Z", fraction without trailing zeros);
      // PostgresTimeBoundary keeps 24:00:00 at UTC as "24:00:00Z".
      if (micros == kMicrosPerDay && offset == 0) {
        out += "\"24:00:00Z\"";
        return true;
      }
      std::int64_t utc = (micros - offset * kMicrosPerSecond) % kMicrosPerDay;
      if (utc < 0) utc += kMicrosPerDay;
      out.push_back('"');
      append_clock(out, utc, 0);
      out += "Z\"";
      return true;
    }
    case Kind::kTimestamp:
      return map_timestamp(out, text, false, typmod, ctx, r.oid);
    case Kind::kTimestamptz:
      return map_timestamp(out, text, true, typmod, ctx, r.oid);
    case Kind::kInterval:
      return map_interval(out, text, ctx, r.oid);
    case Kind::kArray:
      return map_array(out, text, r, typmod, ctx);
    case Kind::kBits:
      // Debezium: bit(1)/varbit(1) a boolean, else io.debezium.data.Bits bytes.
      if (!debezium) {
        json::append_string(out, text);
      } else if (!detail::append_debezium_bits(out, text, typmod)) {
        return fail(ctx, r.oid, text, "not a bit string");
      }
      return true;
    case Kind::kPoint:
      // Debezium: io.debezium.data.geometry.Point {x, y, wkb, srid}.
      if (!debezium) {
        json::append_string(out, text);
      } else if (!detail::append_debezium_point(out, text)) {
        return fail(ctx, r.oid, text, "not a point");
      }
      return true;
    case Kind::kHstore:
      // Debezium (hstore.handling.mode=json): a JSON string holding the map as a JSON object.
      if (!debezium) {
        json::append_string(out, text);
      } else if (!detail::append_hstore_json(out, text)) {
        return fail(ctx, r.oid, text, "not hstore text");
      }
      return true;
    case Kind::kText:
      if (bare) {
        out.append(text);  // a bare token for a type we don't know: keep it as wal2json wrote it
      } else {
        json::append_string(out, text);
      }
      return true;
  }
  return fail(ctx, r.oid, text, "unhandled type");
}

}  // namespace values

using values::classify;
using values::Ctx;
using values::fail;
using values::Kind;
using values::map_scalar;
using values::Resolved;
using values::tl_text;

ResolvedType resolve_type(std::uint32_t type_oid, std::int32_t typmod, const TypeRegistry& types) {
  const Resolved r = classify(type_oid, types);
  ResolvedType t;
  t.type_oid = type_oid;
  t.typmod = typmod;
  t.kind = r.kind;
  t.base_oid = r.oid;
  t.element = r.element;
  // A domain column has no modifier of its own (atttypmod -1): use its base type's.
  t.value_typmod = typmod < 0 && r.oid != type_oid ? types.domain_typmod(type_oid) : typmod;
  t.generation = types.generation();
  return t;
}

bool append_value(std::string& out, std::string_view token, std::uint32_t type_oid,
                  std::int32_t typmod, const TypeRegistry& types, const ValueMappingOptions& opts,
                  std::string& error) {
  if (token == "null") {
    out += "null";
    return true;
  }
  return append_value(out, token, resolve_type(type_oid, typmod, types), types, opts, error);
}

bool append_value(std::string& out, std::string_view token, const ResolvedType& type,
                  const TypeRegistry& types, const ValueMappingOptions& opts, std::string& error) {
  if (token == "null") {
    out.append(token);
    return true;
  }
  Ctx ctx{types, opts, error, type.type_oid};
  const Resolved r{type.kind, type.base_oid, type.element};
  const bool quoted = json::is_string_token(token);

  // Fast paths: the token already is the JSON we want.
  if (quoted &&
      (r.kind == Kind::kText || (r.kind == Kind::kJson && (opts.format == ValueFormat::kDebezium ||
                                                           !opts.json_as_document)))) {
    out.append(token);
    return true;
  }
  if (!quoted && r.kind == Kind::kText) {
    out.append(token);
    return true;
  }

  std::string_view text = token;
  if (quoted && token.size() >= 2 && token.back() == '"' &&
      token.find('\\', 1) == std::string_view::npos) {
    text = token.substr(1, token.size() - 2);  // nothing escaped: the text is the token's inside
  } else if (quoted) {
    auto& buf = tl_text;
    buf.clear();
    if (!json::unescape_string(token, buf))
      return fail(ctx, type.type_oid, token, "malformed JSON string token");
    text = buf;
  } else if (r.kind != Kind::kInt && r.kind != Kind::kFloat && r.kind != Kind::kNumeric &&
             r.kind != Kind::kBool) {
    return fail(ctx, type.type_oid, token, "expected a JSON string token");
  }
  return map_scalar(out, text, !quoted, r, type.value_typmod, ctx);
}

}  // namespace walrelay::router
