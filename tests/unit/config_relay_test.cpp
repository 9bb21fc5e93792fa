// The configuration loader: source.mode, the relay: section, tables[].outbox.poll and what poll
// mode refuses (config/relay.hpp, docs/relay.md).

#include <gtest/gtest.h>

#include <string>

#include "config_test_support.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::config {
namespace {

using namespace std::chrono_literals;
using namespace walrelay::config::test;

std::string poll_config(const std::string& relay, const std::string& outbox_extra = "",
                        const std::string& rest = "") {
  return "name: billing\nsource:\n  mode: poll\n  conninfo: host=db\n" + relay +
         "tables:\n  - name: public.event_outbox\n    outbox:\n      aggregate_id: "
         "subscription_id\n" +
         outbox_extra + rest;
}

TEST(ConfigRelay, DefaultsInPollMode) {
  const Config config = load_ok(poll_config(""));
  EXPECT_EQ(config.source.mode, SourceMode::kPoll);
  EXPECT_EQ(to_string(config.source.mode), "poll");
  const RelayConfig& r = config.relay;
  EXPECT_EQ(r.claim, RelayClaim::kTransaction);
  EXPECT_EQ(r.batch, 200u);
  EXPECT_EQ(r.poll_interval, 200ms);
  EXPECT_EQ(r.notify_channel, "walrelay_outbox");
  EXPECT_EQ(r.max_attempts, 8u);
  EXPECT_EQ(r.backoff_min, 500ms);
  EXPECT_EQ(r.backoff_max, 30s);
  EXPECT_EQ(r.ack_timeout, 30s);
  EXPECT_TRUE(r.failed_blocks_key);
  EXPECT_EQ(r.retention, 0ms);
  EXPECT_EQ(r.schema, "walrelay");
  // Every outbox table gets the poll columns' defaults.
  const auto& poll = config.tables.at(0).outbox->poll;
  ASSERT_TRUE(poll.has_value());
  EXPECT_EQ(poll->status, "status");
  EXPECT_EQ(poll->attempts, "attempts");
  EXPECT_EQ(poll->sent_at, "sent_at");
  EXPECT_EQ(poll->order_by, "created_at");
  EXPECT_EQ(poll->pending, "pending");
  EXPECT_EQ(poll->sent, "sent");
  EXPECT_EQ(poll->failed, "failed");
  EXPECT_EQ(poll->last_error, "");
}

TEST(ConfigRelay, LogicalIsTheDefaultMode) {
  const Config config = load_ok(kMinimal);
  EXPECT_EQ(config.source.mode, SourceMode::kLogical);
  EXPECT_EQ(to_string(config.source.mode), "logical");
}

TEST(ConfigRelay, EveryKeyIsRead) {
  const Config config = load_ok(poll_config(R"(relay:
  claim: transaction
  batch: 50
  poll_interval: 1s
  notify_channel: ""
  max_attempts: 3
  backoff: {min: 100ms, max: 2s}
  ack_timeout: 5s
  failed_blocks_key: false
  lease: 10s
  retention: 7d
  schema: ops_relay
)",
                                            R"(      poll:
        status: state
        attempts: tries
        sent_at: published_at
        order_by: seq
        statuses: {pending: P, sent: S, failed: F}
        last_error: why
)"));
  const RelayConfig& r = config.relay;
  EXPECT_EQ(r.batch, 50u);
  EXPECT_EQ(r.poll_interval, 1s);
  EXPECT_EQ(r.notify_channel, "");
  EXPECT_EQ(r.max_attempts, 3u);
  EXPECT_EQ(r.backoff_min, 100ms);
  EXPECT_EQ(r.backoff_max, 2s);
  EXPECT_EQ(r.ack_timeout, 5s);
  EXPECT_FALSE(r.failed_blocks_key);
  EXPECT_EQ(r.lease, 10s);
  EXPECT_EQ(r.retention, std::chrono::hours(24 * 7));
  EXPECT_EQ(r.schema, "ops_relay");
  const OutboxPollConfig& poll = *config.tables.at(0).outbox->poll;
  EXPECT_EQ(poll.status, "state");
  EXPECT_EQ(poll.attempts, "tries");
  EXPECT_EQ(poll.sent_at, "published_at");
  EXPECT_EQ(poll.order_by, "seq");
  EXPECT_EQ(poll.pending, "P");
  EXPECT_EQ(poll.sent, "S");
  EXPECT_EQ(poll.failed, "F");
  EXPECT_EQ(poll.last_error, "why");
}

TEST(ConfigRelay, LeaseReadsItsKeysAndDefaults) {
  const Config defaults =
      load_ok(poll_config("relay:\n  claim: lease\n  lease: 30s\n  ack_timeout: 10s\n"));
  EXPECT_EQ(defaults.relay.claim, RelayClaim::kLease);
  EXPECT_EQ(to_string(defaults.relay.claim), "lease");
  EXPECT_EQ(defaults.relay.lease, 30s);
  const OutboxPollConfig& d = *defaults.tables.at(0).outbox->poll;
  EXPECT_EQ(d.owner, "claimed_by");
  EXPECT_EQ(d.lease_until, "lease_until");
  EXPECT_EQ(d.claimed, "claimed");
  EXPECT_EQ(d.retry_wait, "retry_wait");
  const Config named = load_ok(poll_config(
      "relay:\n  claim: lease\n  lease: 2s\n  ack_timeout: 1s\n",
      "      poll:\n        owner: owner_token\n        lease_until: lease_end\n        "
      "statuses: {claimed: C, retry_wait: R}\n"));
  const OutboxPollConfig& n = *named.tables.at(0).outbox->poll;
  EXPECT_EQ(n.owner, "owner_token");
  EXPECT_EQ(n.lease_until, "lease_end");
  EXPECT_EQ(n.claimed, "C");
  EXPECT_EQ(n.retry_wait, "R");
  // claim: transaction leaves them empty (the relay then never writes them).
  const Config tx = load_ok(poll_config(""));
  EXPECT_EQ(tx.tables.at(0).outbox->poll->owner, "");
  EXPECT_EQ(tx.tables.at(0).outbox->poll->claimed, "");
}

TEST(ConfigRelay, LeaseRefusals) {
  // The acknowledgements must be awaited within the lease, whichever key comes first.
  const LoadResult equal = load(poll_config("relay:\n  claim: lease\n  lease: 30s\n"));
  EXPECT_EQ(reason_for(equal, "relay.ack_timeout"),
            "must be shorter than relay.lease (30000 ms) with claim: lease")
      << dump(equal.errors);
  const LoadResult longer =
      load(poll_config("relay:\n  ack_timeout: 5s\n  lease: 2s\n  claim: lease\n"));
  EXPECT_EQ(reason_for(longer, "relay.ack_timeout"),
            "must be shorter than relay.lease (2000 ms) with claim: lease");
  // The lease keys without claim: lease.
  const LoadResult owner = load(poll_config("", "      poll:\n        owner: claimed_by\n"));
  EXPECT_EQ(reason_for(owner, "tables[0].outbox.poll.owner"), "used only with relay.claim: lease");
  const LoadResult until = load(poll_config("", "      poll:\n        lease_until: l\n"));
  EXPECT_EQ(reason_for(until, "tables[0].outbox.poll.lease_until"),
            "used only with relay.claim: lease");
  const LoadResult status =
      load(poll_config("relay:\n  claim: transaction\n",
                       "      poll:\n        statuses: {claimed: c, retry_wait: r}\n"));
  EXPECT_EQ(reason_for(status, "tables[0].outbox.poll.statuses.claimed"),
            "used only with relay.claim: lease");
  EXPECT_EQ(reason_for(status, "tables[0].outbox.poll.statuses.retry_wait"),
            "used only with relay.claim: lease");
  // Five distinct statuses, and columns of their own.
  const std::string lease = "relay:\n  claim: lease\n  ack_timeout: 1s\n";
  const LoadResult same =
      load(poll_config(lease, "      poll:\n        statuses: {claimed: sent}\n"));
  EXPECT_EQ(reason_for(same, "tables[0].outbox.poll.statuses"),
            "pending, sent, failed, claimed and retry_wait must be five different values");
  const LoadResult same_wait =
      load(poll_config(lease, "      poll:\n        statuses: {retry_wait: pending}\n"));
  EXPECT_NE(reason_for(same_wait, "tables[0].outbox.poll.statuses"), "");
  const LoadResult column = load(poll_config(lease, "      poll:\n        owner: status\n"));
  EXPECT_EQ(reason_for(column, "tables[0].outbox.poll.owner"),
            "column \"status\" is also poll.status");
  const LoadResult until_col =
      load(poll_config(lease, "      poll:\n        lease_until: sent_at\n"));
  EXPECT_EQ(reason_for(until_col, "tables[0].outbox.poll.lease_until"),
            "column \"sent_at\" is also poll.sent_at");
  EXPECT_NE(reason_for(load(poll_config(lease, "      poll:\n        owner: \"\"\n")),
                       "tables[0].outbox.poll.owner"),
            "");
}

TEST(ConfigRelay, BadValuesNameTheKey) {
  EXPECT_NE(reason_for(load(poll_config("relay:\n  claim: lock\n")), "relay.claim"), "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  batch: 0\n")), "relay.batch"), "");
  EXPECT_EQ(reason_for(load(poll_config("relay:\n  batch: 10001\n")), "relay.batch"),
            "at most 10000");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  poll_interval: soon\n")), "relay.poll_interval"),
            "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  max_attempts: -1\n")), "relay.max_attempts"),
            "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  ack_timeout: 0\n")), "relay.ack_timeout"), "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  failed_blocks_key: maybe\n")),
                       "relay.failed_blocks_key"),
            "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  retention: forever\n")), "relay.retention"), "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  schema: Ops\n")), "relay.schema"), "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  backoff: {mni: 1s}\n")), "relay.backoff.mni"),
            "");
  EXPECT_EQ(
      reason_for(load(poll_config("relay:\n  backoff: {min: 5s, max: 1s}\n")), "relay.backoff.min"),
      "must not be larger than relay.backoff.max");
  EXPECT_NE(
      reason_for(load(poll_config("relay:\n  notify_channel: " + std::string(64, 'c') + "\n")),
                 "relay.notify_channel"),
      "");
  EXPECT_NE(reason_for(load(poll_config("relay:\n  batchsize: 3\n")), "relay.batchsize"), "");
  EXPECT_NE(reason_for(load(poll_config("", "      poll:\n        status: \"\"\n")),
                       "tables[0].outbox.poll.status"),
            "");
  EXPECT_EQ(reason_for(load(poll_config("", "      poll:\n        statuses: {sent: pending}\n")),
                       "tables[0].outbox.poll.statuses"),
            "pending, sent and failed must be three different values");
  EXPECT_EQ(reason_for(load(poll_config("", "      poll:\n        attempts: status\n")),
                       "tables[0].outbox.poll.attempts"),
            "column \"status\" is also poll.status");
  EXPECT_NE(reason_for(load(with("  mode: polling\n")), "source.mode"), "");
}

TEST(ConfigRelay, PollModeRefusesWhatNeedsTheWal) {
  const LoadResult row_table = load(poll_config("", "", "  - name: public.invoices\n"));
  EXPECT_NE(reason_for(row_table, "tables[1]").find("need the WAL"), std::string::npos)
      << dump(row_table.errors);
  const LoadResult messages = load(poll_config("", "", "messages:\n  - prefix: outbox\n"));
  EXPECT_NE(reason_for(messages, "messages").find("need the WAL"), std::string::npos);
  const LoadResult eos = load(poll_config("", "", "delivery: exactly_once\n"));
  EXPECT_NE(reason_for(eos, "delivery").find("exactly_once needs the WAL"), std::string::npos);
  const LoadResult glob = load(
      "name: b\nsource: {mode: poll, conninfo: x}\ntables:\n  - name: public.out*\n    outbox: "
      "{}\n");
  EXPECT_NE(reason_for(glob, "tables[0].name"), "");
  // poll columns without poll mode are a mistake too.
  const LoadResult logical = load(
      "name: b\nsource: {conninfo: x}\ntables:\n  - name: public.o\n    outbox:\n      poll: {}\n");
  EXPECT_EQ(reason_for(logical, "tables[0].outbox.poll"), "used only with source.mode: poll");
  const LoadResult message_poll = load(
      "name: b\nsource: {conninfo: x}\nmessages:\n  - prefix: p\n    outbox:\n      poll: {}\n");
  EXPECT_NE(reason_for(message_poll, "messages[0].outbox.poll"), "");
}

}  // namespace
}  // namespace walrelay::config
