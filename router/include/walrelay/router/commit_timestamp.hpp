#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace walrelay::router {

/// Parses a PostgreSQL timestamp as wal2json prints it with DateStyle ISO
/// (`2026-11-30 00:14:37.104367+00`, offset optional: `+05:30`, none for timestamp without time
/// zone = UTC) to µs since the Unix epoch. nullopt for other shapes (infinity, BC).
std::optional<std::chrono::microseconds> parse_commit_timestamp(std::string_view text);

/// parse_commit_timestamp in ms (rounded down).
std::optional<std::int64_t> parse_commit_timestamp_ms(std::string_view text);

}  // namespace walrelay::router
