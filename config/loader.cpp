#include "loader.hpp"

#include "reconcile_section.hpp"

namespace walrelay::config::loading {

void Loader::read_root(const YAML::Node& root) {
  const Field fields[] = {
      {"name", [this](const YAML::Node& v, const std::string& p) { read_name(v, p); }},
      {"source", [this](const YAML::Node& v, const std::string& p) { read_source(v, p); }},
      {"kafka", [this](const YAML::Node& v, const std::string& p) { read_kafka(v, p); }},
      {"topics", [this](const YAML::Node& v, const std::string& p) { read_topics(v, p); }},
      {"events", [this](const YAML::Node& v, const std::string& p) { read_events(v, p); }},
      {"tables", [this](const YAML::Node& v, const std::string& p) { read_tables(v, p); }},
      {"exclude", [this](const YAML::Node& v, const std::string& p) { read_exclude(v, p); }},
      {"messages", [this](const YAML::Node& v, const std::string& p) { read_messages(v, p); }},
      {"errors", [this](const YAML::Node& v, const std::string& p) { read_errors(v, p); }},
      {"heartbeat", [this](const YAML::Node& v, const std::string& p) { read_heartbeat(v, p); }},
      {"snapshot", [this](const YAML::Node& v, const std::string& p) { read_snapshot(v, p); }},
      {"log", [this](const YAML::Node& v, const std::string& p) { read_log(v, p); }},
      {"metrics", [this](const YAML::Node& v, const std::string& p) { read_metrics(v, p); }},
      {"delivery",
       [this](const YAML::Node& v, const std::string& p) {
         if (auto d = one_of(v, p, kDeliveries)) config_.delivery = *d;
       }},
      {"exactly_once",
       [this](const YAML::Node& v, const std::string& p) { read_exactly_once(v, p); }},
      {"relay", [this](const YAML::Node& v, const std::string& p) { read_relay(v, p); }},
      {"reconcile",
       [this](const YAML::Node& v, const std::string& p) {
         detail::read_reconcile(v, p, env_, config_.reconcile, errors_);
       }},
      {"inbox", [this](const YAML::Node& v, const std::string& p) { read_inbox(v, p); }},
  };
  std::set<std::string> seen;
  if (root.IsNull()) {
    // An empty file: report the required keys rather than "expected a map".
  } else if (root.IsMap()) {
    seen = *walk(root, "", fields);
  } else {
    error("", "expected a map at the top level, got " + describe(root));
    return;
  }
  if (purpose_ == Purpose::kInbox) {
    if (!seen.contains("inbox")) error("inbox.conninfo", std::string(kMissing));
    return;
  }
  if (!seen.contains("name")) error("name", std::string(kMissing));
  if (!seen.contains("source")) error("source.conninfo", std::string(kMissing));
  // A list that is not a list was reported already; an empty or absent one is checked here.
  if (config_.tables.empty() && config_.messages.empty() && !tables_malformed_ &&
      !messages_malformed_) {
    error("tables", "at least one table or message outbox is required");
  }
  check_poll_mode();
  if (masks_columns_ && config_.events.mask_salt.empty() && !mask_salt_malformed_) {
    error("events.mask_salt", "required when a table masks columns");
  }

  // Defaults derived from the name, only from a valid one (an invalid name is reported once).
  if (name_valid_ && !slot_given_) {
    std::string slot = default_slot_name(config_.name);
    if (slot.size() > kMaxSlotName) {
      error("source.slot", "the default slot name " + quoted(slot) +
                               " (from name) is longer than 63 characters; set source.slot");
    } else {
      config_.source.slot = std::move(slot);
    }
  }
  if (name_valid_ && !prefix_given_) config_.topics.prefix = config_.name;
}

void Loader::read_name(const YAML::Node& node, const std::string& path) {
  const auto value = scalar(node, path, "a string");
  if (!value) return;
  if (auto problem = name_problem(*value)) {
    error(path, std::move(*problem));
    return;
  }
  config_.name = *value;
  name_valid_ = true;
}

void Loader::read_metrics(const YAML::Node& node, const std::string& path) {
  const Field fields[] = {
      {"listen",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = scalar(v, p, "host:port or empty");
         if (!s) return;
         if (!s->empty() && s->rfind(':') == std::string::npos) {
           error(p, "expected host:port (e.g. 127.0.0.1:9187) or \"\" for off, got " + quoted(*s));
         } else {
           config_.metrics.listen = std::move(*s);
         }
       }},
      {"max_lag",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) config_.metrics.max_lag = *d;
       }},
  };
  walk(node, path, fields);
}

void Loader::read_log(const YAML::Node& node, const std::string& path) {
  const Field fields[] = {
      {"level",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = scalar(v, p, "a log level");
         if (!s) return;
         if (std::ranges::find(kLogLevels, *s) == kLogLevels.end()) {
           error(p, "expected one of trace, debug, info, warn, error, critical, off, got " +
                        quoted(*s));
         } else {
           config_.log.level = std::move(*s);
         }
       }},
      {"progress_interval",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) config_.log.progress_interval = *d;
       }},
  };
  walk(node, path, fields);
}

}  // namespace walrelay::config::loading
