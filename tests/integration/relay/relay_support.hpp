#pragma once

// The polling relay's integration tests (source.mode poll, docs/relay.md): an outbox table of the
// test's own schema shaped like the seed article's event_outbox, a poll-mode configuration for
// it, and a few queries a user would run by hand.

#include <string>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {

class RelayTest : public IntegrationTest {
 protected:
  void SetUp() override;

  /// CREATE TABLE <schema>.<name>: seq bigserial (order_by), event_id uuid, subscription_id text
  /// (the key), event_type text (the topic), payload `payload_type`, status / attempts /
  /// created_at / sent_at / last_error as the seed article has them, and the set-up SQL
  /// `walrelay check` prints (partial indexes, notify trigger on `channel_`).
  void create_outbox(const std::string& name, const std::string& payload_type = "jsonb");

  /// The outbox lines (under `outbox:`) of `create_outbox`'s table; topic `<name_>.{event_type}`.
  [[nodiscard]] std::vector<std::string> outbox_lines(bool poll_columns = true) const;
  /// `outbox.topic` for event type `type`.
  [[nodiscard]] std::string topic_for(const std::string& type) const { return name_ + "." + type; }

  /// A poll-mode configuration of the tables, with `relay_lines` under `relay:` (each indented by
  /// two already) after the test defaults (poll 100 ms, back-off 100 ms..1 s, ack 5 s), and
  /// `metrics_listen_`.
  [[nodiscard]] std::string poll_yaml(const std::vector<TableEntry>& tables,
                                      const std::string& relay_lines = "") const;

  /// Inserts one event (committed); returns its event_id.
  std::string insert(const std::string& table_name, const std::string& key, const std::string& type,
                     const std::string& payload_sql);
  /// `status` of the row with `event_id`.
  std::string status_of(const std::string& table_name, const std::string& event_id);
  /// Rows of the table with `status`.
  long count_status(const std::string& table_name, const std::string& status);
  /// Waits until no row of the table is pending.
  bool wait_drained(const std::string& table_name,
                    std::chrono::milliseconds timeout = kDefaultTimeout);

  std::string channel_;          ///< this test's notify channel
  std::string metrics_listen_;   ///< metrics.listen of poll_yaml ("" = off; 127.0.0.1:0 = any)
  std::string conninfo_suffix_;  ///< appended to source.conninfo by poll_yaml (e.g. " user=x")
};

/// Creates `topic` with `partitions` and the topic `configs` (name, value) through the admin API,
/// waiting for the answer. Throws std::runtime_error with the broker's reason.
void create_topic(const std::string& bootstrap, const std::string& topic, int partitions,
                  const std::vector<std::pair<std::string, std::string>>& configs);

}  // namespace walrelay::itest
