#pragma once

// The value mapping's parts shared by value_mapping.cpp and value_arrays.cpp (private to
// walrelay_router).

#include <cstdint>
#include <string>
#include <string_view>

#include "walrelay/router/type_registry.hpp"
#include "walrelay/router/value_mapping.hpp"

namespace walrelay::router::values {

using Kind = ValueKind;

struct Resolved {
  Kind kind = Kind::kText;
  std::uint32_t oid = 0;      ///< after resolving domains
  std::uint32_t element = 0;  ///< element type of an array
};

/// `type_oid`'s mapping rule after following domains (value_mapping.cpp).
Resolved classify(std::uint32_t type_oid, const TypeRegistry& types);

struct Ctx {
  const TypeRegistry& types;
  const ValueMappingOptions& opts;
  std::string& error;
  std::uint32_t type_oid;  ///< the column's declared type, for messages
  int depth = 0;           ///< array nesting (domains over arrays inside arrays)
};

/// Sets ctx.error to "cannot map value <text> of type <type_oid's name> [in <column type>]: <why>"
/// and returns false.
bool fail(Ctx& ctx, std::uint32_t type_oid, std::string_view text, std::string_view why);

/// One value's PostgreSQL `text` (unescaped) mapped by `r` into `out`; `bare` when wal2json
/// printed it as a bare JSON token (numbers, true/false) rather than a string (value_mapping.cpp).
bool map_scalar(std::string& out, std::string_view text, bool bare, const Resolved& r,
                std::int32_t typmod, Ctx& ctx);

/// An array literal (PostgreSQL's array_out text) as a JSON array, elements by map_scalar
/// (value_arrays.cpp).
bool map_array(std::string& out, std::string_view text, const Resolved& r, std::int32_t typmod,
               Ctx& ctx);

}  // namespace walrelay::router::values
