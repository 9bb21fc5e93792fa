#include "loader.hpp"

namespace walrelay::config::loading {

void Loader::read_source(const YAML::Node& node, const std::string& path) {
  SourceConfig& source = config_.source;
  const Field fields[] = {
      {"mode",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto m = one_of(v, p, kSourceModes)) source.mode = *m;
       }},
      {"conninfo",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) source.conninfo = std::move(*s);
       }},
      {"slot",
       [&](const YAML::Node& v, const std::string& p) {
         slot_given_ = true;
         auto s = scalar(v, p, "a string");
         if (!s) return;
         if (auto problem = slot_problem(*s)) {
           error(p, std::move(*problem));
         } else {
           source.slot = std::move(*s);
         }
       }},
      {"create_slot",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) source.create_slot = *b;
       }},
      {"status_interval",
       [&](const YAML::Node& v, const std::string& p) {
         const auto d = duration(v, p);
         if (!d) return;
         if (*d > kMaxStatusInterval) {
           error(p, "must be at most 1h (3600s)");
         } else {
           source.status_interval = *d;
         }
       }},

      {"state_dir",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) source.state_dir = std::move(*s);
       }},
      {"max_repeated_errors",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = positive_int(v, p)) {
           if (*n > 1000) {
             error(p, "at most 1000");
           } else {
             source.max_repeated_errors = *n;
           }
         }
       }},
      {"confirm_interval",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) source.confirm_interval = *d;
       }},
      {"catalog_check_interval",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) source.catalog_check_interval = *d;
       }},
      {"allow_slot_reset",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) source.allow_slot_reset = *b;
       }},
      {"allow_sql_ascii",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) source.allow_sql_ascii = *b;
       }},
      {"reconnect_min",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) source.reconnect_min = *d;
       }},
      {"reconnect_max",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) source.reconnect_max = *d;
       }},
  };
  const auto seen = walk(node, path, fields);
  if (seen && !seen->contains("conninfo")) error(join(path, "conninfo"), std::string(kMissing));
  if (source.reconnect_min > source.reconnect_max) {
    error(join(path, "reconnect_min"), "must not be larger than source.reconnect_max");
  }
}

void Loader::read_errors(const YAML::Node& node, const std::string& path) {
  ErrorsConfig& errors = config_.errors;
  const Field fields[] = {
      {"policy",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto e = one_of(v, p, kErrorPolicies)) errors.policy = *e;
       }},
      {"dead_letter_topic",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = nonempty_string(v, p);
         if (!s) return;
         if (auto problem = prefix_problem(*s)) {
           error(p, std::move(*problem));
         } else {
           errors.dead_letter_topic = std::move(*s);
         }
       }},
  };
  const auto seen = walk(node, path, fields);
  if (seen && errors.policy == ErrorPolicy::kDeadLetter && !seen->contains("dead_letter_topic")) {
    error(join(path, "dead_letter_topic"), "required when errors.policy is dead_letter");
  }
}

void Loader::read_exactly_once(const YAML::Node& node, const std::string& path) {
  ExactlyOnceConfig& eos = config_.exactly_once;
  const Field fields[] = {
      {"commit_interval",
       [&](const YAML::Node& v, const std::string& p) {
         const auto d = duration(v, p);
         if (!d) return;
         if (*d > std::chrono::minutes(1)) {
           error(p,
                 "must be at most 1m (a Kafka transaction must end well within "
                 "transaction.timeout.ms)");
         } else {
           eos.commit_interval = *d;
         }
       }},
      {"max_transaction_events",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = positive_int(v, p)) eos.max_transaction_events = *n;
       }},
  };
  walk(node, path, fields);
}

void Loader::read_heartbeat(const YAML::Node& node, const std::string& path) {
  HeartbeatConfig& hb = config_.heartbeat;
  const Field fields[] = {
      {"enabled",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) hb.enabled = *b;
       }},
      {"interval",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) hb.interval = *d;
       }},
      {"query",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) hb.query = std::move(*s);
       }},
  };
  walk(node, path, fields);
}

void Loader::read_snapshot(const YAML::Node& node, const std::string& path) {
  SnapshotConfig& sc = config_.snapshot;
  const Field fields[] = {
      {"mode",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto m = one_of(v, p, kSnapshotModes)) sc.mode = *m;
       }},
      {"chunk_size",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = positive_int(v, p)) {
           if (*n > kMaxChunkSize) {
             error(p, "at most " + std::to_string(kMaxChunkSize) +
                          " rows (a chunk is held in memory while it is published)");
           } else {
             sc.chunk_size = *n;
           }
         }
       }},
      {"max_window_keys",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = positive_int(v, p)) {
           if (*n < kMinWindowKeys) {
             error(p, "at least " + std::to_string(kMinWindowKeys) +
                          " (a smaller bound has chunks of a busy table read again and again)");
           } else {
             sc.max_window_keys = *n;
           }
         }
       }},
      {"new_tables",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = one_of(v, p, kNewTables)) sc.new_tables = *n;
       }},
      {"row_security",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) sc.row_security = *b;
       }},
      {"signal_prefix",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) sc.signal_prefix = std::move(*s);
       }},
      {"signal_table",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = nonempty_string(v, p);
         if (!s) return;
         auto parsed = parse_table_name(*s);
         if (!parsed) {
           error(p, parsed.error());
           return;
         }
         sc.signal_table = std::move(*s);
         sc.signal_table_schema = parsed->schema;
         sc.signal_table_name = parsed->table;
       }},
      {"parallelism",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto n = positive_int(v, p)) {
           if (*n > 16) {
             error(p, "at most 16 (one database connection per table read at once)");
           } else {
             sc.parallelism = *n;
           }
         }
       }},
  };
  walk(node, path, fields);
}

}  // namespace walrelay::config::loading
