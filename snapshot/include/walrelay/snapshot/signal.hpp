#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace walrelay::snapshot {

/// A snapshot signal in Debezium's format (Debezium docs, "Sending signals to a Debezium
/// connector": `execute-snapshot` and `stop-snapshot`):
/// `{"type":"execute-snapshot","data":{"data-collections":["public.orders"],"type":"incremental"}}`.
struct Signal {
  enum class Kind { kExecute, kStop };
  Kind kind = Kind::kExecute;
  /// schema.table names as written (Debezium's data-collection names); empty for a stop of
  /// every table.
  std::vector<std::string> tables;
};

/// Parses a signal's JSON. `type` must be execute-snapshot or stop-snapshot; `data.type`, when
/// present, must be "incremental" (the only kind walrelay runs while streaming; case-insensitive
/// as Debezium); execute needs a non-empty `data-collections` array of strings. The error names
/// the field.
std::expected<Signal, std::string> parse_signal(std::string_view json);

/// Builds the JSON of a signal (what `walrelay snapshot` sends).
std::string signal_json(const Signal& signal);

}  // namespace walrelay::snapshot
