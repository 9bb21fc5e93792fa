#include "walrelay/snapshot/signal.hpp"

#include <simdjson.h>
#include <strings.h>

#include "walrelay/core/json.hpp"

namespace walrelay::snapshot {

std::expected<Signal, std::string> parse_signal(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) {
    return std::unexpected("not a JSON document");
  }
  std::string_view type;
  if (doc["type"].get(type) != simdjson::SUCCESS) {
    return std::unexpected("`type` is missing or not a string");
  }
  Signal s;
  if (type == "execute-snapshot") {
    s.kind = Signal::Kind::kExecute;
  } else if (type == "stop-snapshot") {
    s.kind = Signal::Kind::kStop;
  } else {
    return std::unexpected("`type` " + std::string(type) +
                           " is not execute-snapshot or stop-snapshot");
  }
  simdjson::dom::element data;
  const bool has_data = doc["data"].get(data) == simdjson::SUCCESS;
  if (has_data) {
    std::string_view kind;
    if (auto k = data["type"]; k.error() == simdjson::SUCCESS) {
      if (k.get(kind) != simdjson::SUCCESS) return std::unexpected("`data.type` is not a string");
      if (::strncasecmp(std::string(kind).c_str(), "incremental", 12) != 0) {
        return std::unexpected("`data.type` " + std::string(kind) +
                               " is not supported (only incremental snapshots run while "
                               "streaming)");
      }
    }
    // Debezium's row filters (additional-conditions; additional-condition before 2.0) and
    // surrogate-key change which rows a snapshot reads and how: walrelay reads every row by the
    // table's key, so a signal asking for less (or otherwise) is refused, never silently widened.
    simdjson::dom::array conditions;
    std::string_view text;
    if ((data["additional-conditions"].get(conditions) == simdjson::SUCCESS &&
         conditions.size() > 0) ||
        (data["additional-conditions"].error() == simdjson::SUCCESS &&
         data["additional-conditions"].get(conditions) != simdjson::SUCCESS)) {
      return std::unexpected(
          "`data.additional-conditions` (row filters) is not supported: walrelay reads every "
          "row of a table");
    }
    if (data["additional-condition"].get(text) == simdjson::SUCCESS && !text.empty()) {
      return std::unexpected(
          "`data.additional-condition` (a row filter) is not supported: walrelay reads every "
          "row of a table");
    }
    if (data["surrogate-key"].get(text) == simdjson::SUCCESS && !text.empty()) {
      return std::unexpected(
          "`data.surrogate-key` is not supported: walrelay reads a table in chunks of its own "
          "key (the primary key, else `key_columns`)");
    }
    simdjson::dom::array collections;
    if (auto c = data["data-collections"]; c.error() == simdjson::SUCCESS) {
      if (c.get(collections) != simdjson::SUCCESS) {
        return std::unexpected("`data.data-collections` is not an array");
      }
      for (auto item : collections) {
        std::string_view name;
        if (item.get(name) != simdjson::SUCCESS) {
          return std::unexpected("`data.data-collections` holds something other than a string");
        }
        s.tables.emplace_back(name);
      }
    }
  }
  if (s.kind == Signal::Kind::kExecute && s.tables.empty()) {
    return std::unexpected(
        "execute-snapshot needs `data.data-collections` with at least one table");
  }
  return s;
}

std::string signal_json(const Signal& signal) {
  std::string out = "{\"type\":";
  out += signal.kind == Signal::Kind::kExecute ? "\"execute-snapshot\"" : "\"stop-snapshot\"";
  out += ",\"data\":{\"data-collections\":[";
  for (std::size_t i = 0; i < signal.tables.size(); ++i) {
    if (i > 0) out.push_back(',');
    json::append_string(out, signal.tables[i]);
  }
  out += "],\"type\":\"incremental\"}}";
  return out;
}

}  // namespace walrelay::snapshot
