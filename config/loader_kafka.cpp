#include "loader.hpp"

namespace walrelay::config::loading {

void Loader::read_kafka(const YAML::Node& node, const std::string& path) {
  KafkaConfig& kafka = config_.kafka;
  const Field fields[] = {
      {"bootstrap_servers",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) kafka.bootstrap_servers = std::move(*s);
       }},
      {"properties", [&](const YAML::Node& v, const std::string& p) { read_properties(v, p); }},
      {"max_in_flight_events",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = positive_int(v, p)) kafka.max_in_flight_events = *n;
       }},
      {"max_in_flight_bytes",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = size(v, p)) kafka.max_in_flight_bytes = *n;
       }},
      {"flush_timeout",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) kafka.flush_timeout = *d;
       }},
  };
  walk(node, path, fields);
}

void Loader::read_properties(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) {
    error(path, "expected a map of librdkafka properties, got " + describe(node));
    return;
  }
  std::set<std::string> seen;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
      error(path, "expected a property name, got " + describe(entry.first));
      continue;
    }
    const std::string& name = entry.first.Scalar();
    const std::string child = join(path, name);
    if (!seen.insert(name).second) {
      error(child, "duplicate key");
      continue;
    }
    if (name == "bootstrap.servers") {
      // Two places for one setting would make the precedence a trap.
      error(child, "set kafka.bootstrap_servers instead");
      continue;
    }
    // Values are never quoted in messages: they may be secrets (sasl.password).
    if (!entry.second.IsScalar()) {
      error(child, "expected a string, number or boolean");
      continue;
    }
    auto value = scalar(entry.second, child, "a string, number or boolean");
    if (!value) continue;
    std::string v = normalize_bool(entry.second, std::move(*value));
    // walrelay confirms the slot once Kafka acknowledged an event: settings that make an
    // acknowledgement mean nothing, or let a retry reorder a key's events, break the delivery
    // guarantee (docs/delivery.md "Delivery guarantee").
    if (name == "acks" && v == "0") {
      error(child,
            "acks=0 acknowledges nothing, so walrelay could confirm changes the broker "
            "never stored; use all (the default)");
      continue;
    }
    if (name == "enable.idempotence" && v == "false") {
      error(child,
            "without idempotence a retried batch can land after a later one and reorder "
            "a key's events; keep true (the default)");
      continue;
    }
    config_.kafka.properties[name] = std::move(v);
  }
}

std::string Loader::normalize_bool(const YAML::Node& node, std::string value) {
  if (node.Tag() != "?") return value;
  const std::string& raw = node.Scalar();
  for (std::string_view t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}) {
    if (raw == t) return "true";
  }
  for (std::string_view f : {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}) {
    if (raw == f) return "false";
  }
  return value;
}

void Loader::read_topics(const YAML::Node& node, const std::string& path) {
  const Field fields[] = {
      {"prefix",
       [&](const YAML::Node& v, const std::string& p) {
         prefix_given_ = true;
         auto s = scalar(v, p, "a string");
         if (!s) return;
         if (auto problem = prefix_problem(*s)) {
           error(p, std::move(*problem));
         } else {
           config_.topics.prefix = std::move(*s);
         }
       }},
  };
  walk(node, path, fields);
}

void Loader::read_events(const YAML::Node& node, const std::string& path) {
  EventsConfig& events = config_.events;
  // Only values that were read correctly take part in the cross-key check below.
  std::optional<ValueFormat> value_format;
  std::optional<bool> json_as_document;
  std::optional<DecimalHandling> decimal_handling;
  const Field fields[] = {
      {"value_format",
       [&](const YAML::Node& v, const std::string& p) {
         value_format = one_of(v, p, kValueFormats);
         if (value_format) events.value_format = *value_format;
       }},
      {"json_as_document",
       [&](const YAML::Node& v, const std::string& p) {
         json_as_document = boolean(v, p);
         if (json_as_document) events.json_as_document = *json_as_document;
       }},
      {"decimal_handling",
       [&](const YAML::Node& v, const std::string& p) {
         decimal_handling = one_of(v, p, kDecimalHandlings);
         if (decimal_handling) events.decimal_handling = *decimal_handling;
       }},
      {"tombstones_on_delete",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) events.tombstones_on_delete = *b;
       }},
      {"operations",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto ops = operations(v, p)) events.operations = *ops;
       }},
      {"toast_placeholder",
       [&](const YAML::Node& v, const std::string& p) {
         // May be empty: an unchanged TOASTed value then reads as "".
         if (auto s = scalar(v, p, "a string")) events.toast_placeholder = std::move(*s);
       }},
      {"mask_salt",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = scalar(v, p, "a string");
         if (s) {
           events.mask_salt = std::move(*s);
         } else {
           mask_salt_malformed_ = true;  // one error for the key, not a second "required"
         }
       }},
      {"partitions",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = one_of(v, p, kPartitions)) events.partitions = *s;
       }},
      {"transaction_metadata",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) events.transaction_metadata = *b;
       }},
  };
  walk(node, path, fields);
  if (decimal_handling && *decimal_handling != DecimalHandling::kPrecise &&
      value_format != ValueFormat::kDebezium) {
    error(join(path, "decimal_handling"),
          "is Debezium's decimal.handling.mode and needs value_format: debezium (native "
          "always writes numeric and money as exact decimal strings)");
  }
  if (json_as_document == true && value_format == ValueFormat::kDebezium) {
    error(join(path, "json_as_document"),
          "must be false when value_format is debezium (Debezium's JSON converter gives json "
          "columns as strings)");
  }
}

}  // namespace walrelay::config::loading
