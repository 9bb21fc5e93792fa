#include "walrelay/decoder/wal2json_value.hpp"

#include <strings.h>

#include <algorithm>

#include "walrelay/core/json.hpp"

namespace walrelay::decoder {

namespace {

// Built-in type OIDs (PostgreSQL's pg_type.dat; stable across versions).
constexpr std::uint32_t kBoolOid = 16;
constexpr std::uint32_t kByteaOid = 17;
constexpr std::uint32_t kInt8Oid = 20;
constexpr std::uint32_t kInt2Oid = 21;
constexpr std::uint32_t kInt4Oid = 23;
constexpr std::uint32_t kOidOid = 26;
constexpr std::uint32_t kFloat4Oid = 700;
constexpr std::uint32_t kFloat8Oid = 701;
constexpr std::uint32_t kNumericOid = 1700;

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         ::strncasecmp(text.data(), prefix.data(), prefix.size()) == 0;
}

}  // namespace

bool append_wal2json_value(std::string& out, std::optional<std::string_view> text,
                           std::uint32_t type_oid, NumericTokens numerics) {
  if (!text) {
    out += "null";
    return true;
  }
  const std::string_view v = *text;
  switch (type_oid) {
    case kInt2Oid:
    case kInt4Oid:
    case kInt8Oid:
    case kOidOid:
    case kFloat4Oid:
    case kFloat8Oid:
    case kNumericOid: {
      // Digits first: the common case, and then not NaN/Infinity (their letters are not digits).
      const bool digits = std::all_of(v.begin(), v.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
      });
      const bool special =
          !digits && (starts_with_nocase(v, "NaN") || starts_with_nocase(v, "Infinity") ||
                      starts_with_nocase(v, "-Infinity"));
      if (!special && !digits) return false;
      if (numerics == NumericTokens::kStrings) {
        json::append_string(out, v);
      } else if (special) {
        out += "null";
      } else {
        out.append(v);
      }
      return true;
    }
    case kBoolOid:
      out += v == "t" ? "true" : "false";
      return true;
    case kByteaOid:
      // bytea_output=hex prints `\x0102`; wal2json starts after the `\x`.
      json::append_string(out, v.size() >= 2 ? v.substr(2) : std::string_view());
      return true;
    default:
      json::append_string(out, v);
      return true;
  }
}

}  // namespace walrelay::decoder
