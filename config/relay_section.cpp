// The loader's `relay:` section, `tables[].outbox.poll` and the rules of `source.mode: poll`
// (config/relay.hpp, docs/relay.md).
#include "loader.hpp"

namespace walrelay::config {

std::string_view to_string(SourceMode value) {
  return loading::spelling(loading::kSourceModes, value);
}
std::string_view to_string(RelayClaim value) {
  return loading::spelling(loading::kRelayClaims, value);
}

}  // namespace walrelay::config

namespace walrelay::config::loading {

namespace {

constexpr std::size_t kMaxBatch = 10'000;
constexpr std::size_t kMaxAttempts = 1'000;

/// A LISTEN channel is an identifier (PostgreSQL docs "LISTEN": `channel` is an identifier; the
/// relay quotes it, so any characters work, but NAMEDATALEN - 1 bytes is the limit).
std::optional<std::string> channel_problem(std::string_view channel) {
  if (channel.size() > kMaxSlotName) return "at most 63 bytes (a PostgreSQL identifier)";
  if (channel.find('\0') != std::string_view::npos) return "must not contain NUL";
  return std::nullopt;
}

}  // namespace

void Loader::read_relay(const YAML::Node& node, const std::string& path) {
  RelayConfig& relay = config_.relay;
  const auto bounded = [&](std::size_t& target, std::size_t max) {
    return [&, max](const YAML::Node& v, const std::string& p) {
      const auto n = positive_int(v, p);
      if (!n) return;
      if (*n > max) {
        error(p, "at most " + std::to_string(max));
      } else {
        target = *n;
      }
    };
  };
  const auto period = [&](std::chrono::milliseconds& target) {
    return [&](const YAML::Node& v, const std::string& p) {
      if (auto d = duration(v, p)) target = *d;
    };
  };
  const Field backoff_fields[] = {
      {"min", period(relay.backoff_min)},
      {"max", period(relay.backoff_max)},
  };
  const Field fields[] = {
      {"claim",
       [&](const YAML::Node& v, const std::string& p) {
         if (const auto c = one_of(v, p, kRelayClaims)) relay.claim = *c;
       }},
      {"batch", bounded(relay.batch, kMaxBatch)},
      {"poll_interval", period(relay.poll_interval)},
      {"notify_channel",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = scalar(v, p, "a channel name or \"\"");
         if (!s) return;
         if (auto problem = channel_problem(*s)) {
           error(p, std::move(*problem));
         } else {
           relay.notify_channel = std::move(*s);
         }
       }},
      {"max_attempts", bounded(relay.max_attempts, kMaxAttempts)},
      {"backoff", [&](const YAML::Node& v, const std::string& p) { walk(v, p, backoff_fields); }},
      {"ack_timeout", period(relay.ack_timeout)},
      {"failed_blocks_key",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto b = boolean(v, p)) relay.failed_blocks_key = *b;
       }},
      {"lease", period(relay.lease)},
      {"schema",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = scalar(v, p, "a schema name");
         if (!s) return;
         if (!is_plain_identifier(*s)) {
           error(p,
                 "expected a plain lower-case identifier ([a-z_][a-z0-9_]*, at most 63 "
                 "bytes), got " +
                     quoted(*s));
           return;
         }
         relay.schema = std::move(*s);
       }},
      {"retention",
       [&](const YAML::Node& v, const std::string& p) {
         // "0" keeps sent rows; `7d` is the seed article's figure, so days are read here too.
         if (v.IsScalar() && v.Scalar() == "0") {
           relay.retention = std::chrono::milliseconds{0};
           return;
         }
         if (v.IsScalar() && v.Scalar().size() > 1 && v.Scalar().back() == 'd') {
           YAML::Node hours(v.Scalar().substr(0, v.Scalar().size() - 1) + "h");
           if (const auto d = duration(hours, p); d && d->count() % 3'600'000 == 0) {
             const auto days = d->count() / 3'600'000;
             if (days > 3650) {
               error(p, "at most 3650d");
             } else {
               relay.retention = std::chrono::hours(24 * days);
             }
           }
           return;
         }
         if (auto d = duration(v, p)) relay.retention = *d;
       }},
  };
  walk(node, path, fields);
  if (relay.backoff_min > relay.backoff_max) {
    error(join(join(path, "backoff"), "min"), "must not be larger than relay.backoff.max");
  }
  // A lease that could end while the batch's acknowledgements are still awaited would let another
  // instance publish the rows beside this one (docs/relay.md "The lease variant").
  if (relay.claim == RelayClaim::kLease && relay.ack_timeout >= relay.lease) {
    error(join(path, "ack_timeout"), "must be shorter than relay.lease (" +
                                         std::to_string(relay.lease.count()) +
                                         " ms) with claim: lease");
  }
}

void Loader::read_outbox_poll(const YAML::Node& node, const std::string& path,
                              OutboxPollConfig& poll) {
  const auto text = [&](std::string& target) {
    return [&](const YAML::Node& v, const std::string& p) {
      if (auto s = nonempty_string(v, p)) target = std::move(*s);
    };
  };
  const Field status_fields[] = {
      {"pending", text(poll.pending)},       {"sent", text(poll.sent)},
      {"failed", text(poll.failed)},         {"claimed", text(poll.claimed)},
      {"retry_wait", text(poll.retry_wait)},
  };
  const Field fields[] = {
      {"status", text(poll.status)},
      {"attempts", text(poll.attempts)},
      {"sent_at", text(poll.sent_at)},
      {"order_by", text(poll.order_by)},
      {"statuses", [&](const YAML::Node& v, const std::string& p) { walk(v, p, status_fields); }},
      {"last_error",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = scalar(v, p, "a column name or \"\"")) poll.last_error = std::move(*s);
       }},
      {"owner", text(poll.owner)},
      {"lease_until", text(poll.lease_until)},
  };
  if (node.IsNull()) return;  // `poll:` alone: the defaults
  walk(node, path, fields);
}

void Loader::check_outbox_poll(const std::string& path, OutboxPollConfig& poll) {
  const bool lease = config_.relay.claim == RelayClaim::kLease;
  const std::pair<std::string, std::string*> lease_keys[] = {
      {"owner", &poll.owner},
      {"lease_until", &poll.lease_until},
      {"statuses.claimed", &poll.claimed},
      {"statuses.retry_wait", &poll.retry_wait}};
  const std::string_view defaults[] = {"claimed_by", "lease_until", "claimed", "retry_wait"};
  for (std::size_t i = 0; i < std::size(lease_keys); ++i) {
    std::string& value = *lease_keys[i].second;
    if (!lease && !value.empty()) {
      error(path + "." + lease_keys[i].first, "used only with relay.claim: lease");
    } else if (lease && value.empty()) {
      value = defaults[i];
    }
  }
  const std::string statuses = join(path, "statuses");
  const std::string* values[] = {&poll.pending, &poll.sent, &poll.failed, &poll.claimed,
                                 &poll.retry_wait};
  bool distinct = true;
  for (std::size_t i = 0; i < std::size(values); ++i) {
    for (std::size_t j = i + 1; j < std::size(values); ++j) {
      distinct = distinct && (values[j]->empty() || *values[i] != *values[j]);
    }
  }
  if (!distinct) {
    error(statuses, lease ? "pending, sent, failed, claimed and retry_wait must be five "
                            "different values"
                          : "pending, sent and failed must be three different values");
  }
  // The relay writes these columns; one column for two purposes would corrupt the row.
  const std::pair<std::string_view, const std::string*> columns[] = {
      {"status", &poll.status},   {"attempts", &poll.attempts},
      {"sent_at", &poll.sent_at}, {"last_error", &poll.last_error},
      {"owner", &poll.owner},     {"lease_until", &poll.lease_until}};
  for (std::size_t i = 0; i < std::size(columns); ++i) {
    for (std::size_t j = i + 1; j < std::size(columns); ++j) {
      if (!columns[j].second->empty() && *columns[i].second == *columns[j].second) {
        error(join(path, columns[j].first), "column " + quoted(*columns[j].second) +
                                                " is also poll." + std::string(columns[i].first));
      }
    }
  }
}

void Loader::check_poll_mode() {
  if (config_.source.mode != SourceMode::kPoll) {
    for (std::size_t i = 0; i < config_.tables.size(); ++i) {
      if (config_.tables[i].outbox && config_.tables[i].outbox->poll) {
        error("tables[" + std::to_string(i) + "].outbox.poll", "used only with source.mode: poll");
      }
    }
    return;
  }
  constexpr std::string_view kWal = " need the WAL: source.mode poll relays outbox tables only";
  for (std::size_t i = 0; i < config_.tables.size(); ++i) {
    TableConfig& table = config_.tables[i];
    const std::string item = "tables[" + std::to_string(i) + "]";
    if (!table.outbox) {
      error(item, "row-change tables" + std::string(kWal) + " (give it an outbox: section, or " +
                      "use source.mode: logical)");
      continue;
    }
    if (table.name.find('*') != std::string::npos) {
      error(item + ".name", "source.mode poll needs one table per entry, not a pattern");
    }
    if (!table.outbox->poll) table.outbox->poll.emplace();
    check_outbox_poll(item + ".outbox.poll", *table.outbox->poll);
  }
  if (!config_.messages.empty()) error("messages", "message outboxes" + std::string(kWal));
  if (config_.delivery == Delivery::kExactlyOnce) {
    error("delivery",
          "exactly_once needs the WAL; source.mode poll delivers at least once (consumers "
          "deduplicate by the `id` header)");
  }
}

}  // namespace walrelay::config::loading
