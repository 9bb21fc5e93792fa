// relay.claim: lease (docs/relay.md "The lease variant"): two relay processes keep every key's
// order and publish each event once; a relay that dies holding a claim leaves its rows to another
// after the lease; a stale owner's marks change nothing of a row another owner took over.

#include <map>
#include <set>
#include <thread>

#include "relay_support.hpp"
#include "walrelay/relay/outbox_table.hpp"

namespace walrelay::itest {
namespace {

constexpr std::string_view kLease = "  claim: lease\n  lease: 2s\n  ack_timeout: 1s\n";

class RelayLeaseTest : public RelayTest {
 protected:
  /// create_outbox's table with the lease columns (owner claimed_by, lease_until: the defaults).
  void create_lease_outbox(const std::string& name) {
    create_outbox(name);
    pg_->exec("ALTER TABLE " + table(name) +
              " ADD COLUMN claimed_by text, ADD COLUMN lease_until timestamptz");
  }
  std::string lease_yaml(const std::string& name, const std::string& more = "") const {
    return poll_yaml({{table(name), outbox_lines()}}, std::string(kLease) + more);
  }
  /// Runs `walrelay <words> --config <yaml> <extra>` to its end; its process, `code` its exit.
  std::unique_ptr<WalrelayProcess> command(const std::string& yaml,
                                           const std::vector<std::string>& words,
                                           const std::vector<std::string>& extra, int& code) {
    auto proc = std::make_unique<WalrelayProcess>(yaml, "cmd-" + words.at(0));
    std::vector<std::string> argv = words;
    argv.emplace_back("--config");
    argv.push_back(proc->config_path().string());
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc->start(argv);
    code = proc->wait_exit(30s);
    return proc;
  }
};

TEST_F(RelayLeaseTest, TwoRelaysPublishEveryEventOnceAndEachKeyInOrder) {
  constexpr int kKeys = 20;
  constexpr int kPerKey = 20;  // 400 events
  create_lease_outbox("event_outbox");
  create_topic(env_.kafka_bootstrap, topic_for("evt"), 6, {});
  const std::string yaml = lease_yaml("event_outbox", "  batch: 20\n");
  WalrelayProcess a(yaml, "relay-a");
  WalrelayProcess b(yaml, "relay-b");
  a.start();
  b.start();
  // Two writers, each with its own keys, in transactions of 1 to 3 rows.
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      try {
        Pg pg(env_.pg_conninfo);
        std::map<int, int> next;
        for (int round = 0; round < kPerKey; ++round) {
          for (int k = w; k < kKeys; k += 2) {
            std::string values;
            const int rows = 1 + (round + k) % 3;
            for (int r = 0; r < rows && next[k] < kPerKey; ++r) {
              if (!values.empty()) values += ", ";
              values += "('key-" + std::to_string(k) +
                        "', 'evt', '{\"n\": " + std::to_string(next[k]++) + "}')";
            }
            if (values.empty()) continue;
            pg.exec("INSERT INTO " + table("event_outbox") +
                    " (subscription_id, event_type, payload) VALUES " + values);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_TRUE(wait_until([&] { return count_status("event_outbox", "sent") == kKeys * kPerKey; },
                         60s, 200ms))
      << a.logs() << b.logs();
  // Marked rows carry no claim any more, and no attempt was counted.
  EXPECT_EQ(pg_->value("SELECT count(*) FROM " + table("event_outbox") +
                       " WHERE claimed_by IS NOT NULL OR lease_until IS NOT NULL OR attempts > 0"),
            "0");
  const auto records = kafka_->read_at_least({topic_for("evt")}, kKeys * kPerKey, 60s);
  std::vector<KafkaRecord> sorted = records;
  sort_by_partition_order(sorted);
  std::set<std::string> ids;
  std::map<std::string, std::vector<int>> order;  // key → n in partition order
  for (const KafkaRecord& r : sorted) {
    ids.insert(r.header("id"));
    order[r.key.value_or("")].push_back(std::stoi(json_at(r.value.value_or("{}"), "/n")));
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kKeys * kPerKey));
  EXPECT_EQ(records.size(), static_cast<std::size_t>(kKeys * kPerKey))
      << "duplicates although nothing crashed";
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kKeys));
  for (const auto& [key, ns] : order) {
    std::vector<int> expected(kPerKey);
    for (int i = 0; i < kPerKey; ++i) expected[i] = i;
    EXPECT_EQ(ns, expected) << key;
  }
  EXPECT_EQ(a.stop(), 0) << a.logs();
  EXPECT_EQ(b.stop(), 0) << b.logs();
  // Both ran the lease variant (which one published how much is the scheduler's business).
  for (const WalrelayProcess* p : {&a, &b}) {
    EXPECT_NE(p->stderr_text().find("claim lease"), std::string::npos) << p->logs();
  }
}

// A relay that dies after Kafka acknowledged its batch and before marking it (the crash seam:
// std::_Exit, no clean-up, as a SIGKILL) leaves the rows claimed under its token; nobody takes
// them before the lease ends, then another relay publishes them again with the same ids, without
// counting an attempt.
TEST_F(RelayLeaseTest, RowsOfARelayThatDiedArePublishedByAnotherAfterTheLease) {
  create_lease_outbox("event_outbox");
  create_topic(env_.kafka_bootstrap, topic_for("payment_failed"), 1, {});
  const std::string first = insert("event_outbox", "sub-1", "payment_failed", "'{\"n\": 1}'");
  const std::string designated = insert("event_outbox", "sub-2", "payment_failed", "'{\"n\": 2}'");
  const std::string third = insert("event_outbox", "sub-1", "payment_failed", "'{\"n\": 3}'");
  const std::string yaml = lease_yaml("event_outbox");
  {
    WalrelayProcess crashing(yaml, "relay-crash");
    ::setenv("WALRELAY_RELAY_TEST_CRASH_AFTER_ACK", designated.c_str(), 1);
    crashing.start();
    ::unsetenv("WALRELAY_RELAY_TEST_CRASH_AFTER_ACK");
    EXPECT_EQ(crashing.wait_exit(), 86) << crashing.logs();
  }
  const std::string t = table("event_outbox");
  EXPECT_EQ(count_status("event_outbox", "claimed"), 3);
  EXPECT_EQ(pg_->value("SELECT count(DISTINCT claimed_by) FROM " + t), "1");
  const std::string lease_end = pg_->value("SELECT max(lease_until)::text FROM " + t);
  auto records = kafka_->read_all({topic_for("payment_failed")});
  ASSERT_EQ(records.size(), 3u) << describe(records);
  WalrelayProcess relay(yaml, "relay");
  relay.start();
  ASSERT_TRUE(wait_until([&] { return count_status("event_outbox", "sent") == 3; }, 30s, 100ms))
      << relay.logs();
  // Taken over only once the lease had passed, attempts unchanged, the claim cleared.
  EXPECT_EQ(pg_->value("SELECT count(*) FROM " + t + " WHERE sent_at >= " + sql_literal(lease_end) +
                       "::timestamptz"),
            "3");
  EXPECT_EQ(pg_->value("SELECT sum(attempts) FROM " + t), "0");
  EXPECT_EQ(pg_->value("SELECT count(*) FROM " + t + " WHERE claimed_by IS NOT NULL"), "0");
  records = kafka_->read_all({topic_for("payment_failed")});
  std::map<std::string, std::vector<KafkaRecord>> by_id;
  for (const KafkaRecord& r : records) by_id[r.header("id")].push_back(r);
  ASSERT_EQ(by_id.size(), 3u) << describe(records);
  for (const std::string& id : {first, designated, third}) {
    ASSERT_EQ(by_id[id].size(), 2u) << id << describe(records);
    EXPECT_EQ(by_id[id][0].value, by_id[id][1].value);
  }
  // sub-1's order holds on the second pass too.
  std::vector<std::string> sub1;
  for (const KafkaRecord& r : records) {
    if (r.key == "sub-1") sub1.push_back(r.header("id"));
  }
  EXPECT_EQ(sub1, (std::vector<std::string>{first, third, first, third}));
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// Failures under a lease (docs/relay.md "Failures"): a batch Kafka acknowledged nothing of goes
// back to pending with no attempt counted; once other rows share its batches, the poison row waits
// as retry_wait with attempts + 1 and ends failed at max_attempts; its key's later row goes back
// to pending unclaimed, other keys flow. Kafka refuses the row for real (INVALID_TIMESTAMP: its
// topic accepts no record older than an hour, KIP-937; the row says 2000).
TEST_F(RelayLeaseTest, AFailingRowWaitsAsRetryWaitThenFailsAndOtherKeysFlow) {
  create_lease_outbox("event_outbox");
  create_topic(env_.kafka_bootstrap, topic_for("poison"), 1,
               {{"message.timestamp.before.max.ms", "3600000"}});
  const std::string t = table("event_outbox");
  // Every status the rows pass through, as the relay writes them.
  pg_->exec("CREATE TABLE " + table("seen") + " (event_id uuid, status text, attempts int)");
  pg_->exec("CREATE FUNCTION " + table("seen_fn") + "() RETURNS trigger LANGUAGE plpgsql AS $$ " +
            "BEGIN INSERT INTO " + table("seen") +
            " VALUES (NEW.event_id, NEW.status, NEW.attempts); RETURN NULL; END $$");
  pg_->exec("CREATE TRIGGER seen AFTER UPDATE ON " + t + " FOR EACH ROW EXECUTE FUNCTION " +
            table("seen_fn") + "()");
  WalrelayProcess relay(lease_yaml("event_outbox", "  max_attempts: 3\n"), "relay");
  relay.start();
  const std::string poison =
      pg_->value("INSERT INTO " + t +
                 " (subscription_id, event_type, payload, created_at) VALUES ('sub-p', 'poison', "
                 "'{\"n\": 1}', '2000-01-01 00:00:00+00') RETURNING event_id");
  // Alone in its batch: a whole-batch failure, given back to pending without an attempt.
  ASSERT_TRUE(relay.wait_for_log("Kafka acknowledged no record", 20s)) << relay.logs();
  ASSERT_TRUE(wait_until([&] { return status_of("event_outbox", poison) != "claimed"; }, 5s, 20ms));
  EXPECT_EQ(pg_->value("SELECT status || '/' || attempts || '/' || (claimed_by IS NULL) FROM " + t +
                       " WHERE event_id = " + sql_literal(poison)),
            "pending/0/true");
  const std::string behind = insert("event_outbox", "sub-p", "healthy", "'{\"n\": 2}'");
  std::vector<std::string> healthy;
  const bool failed = wait_until(
      [&] {
        healthy.push_back(insert("event_outbox", "sub-" + std::to_string(healthy.size()), "healthy",
                                 "'{\"n\": 0}'"));
        return status_of("event_outbox", poison) == "failed";
      },
      60s, 100ms);
  ASSERT_TRUE(failed) << relay.logs();
  EXPECT_EQ(pg_->value("SELECT attempts || '/' || (last_error <> '') || '/' || (claimed_by IS "
                       "NULL) FROM " +
                       t + " WHERE event_id = " + sql_literal(poison)),
            "3/true/true");
  // Between its tries it waited as retry_wait, and each try's claim counted nothing.
  EXPECT_EQ(pg_->value("SELECT string_agg(DISTINCT status || '/' || attempts, ',') FROM " +
                       table("seen") + " WHERE event_id = " + sql_literal(poison) +
                       " AND status IN ('retry_wait', 'failed')"),
            "failed/3,retry_wait/1,retry_wait/2");
  ASSERT_TRUE(wait_until([&] {
    return std::stol(pg_->value("SELECT count(*) FROM " + t +
                                " WHERE status <> 'sent' AND subscription_id <> 'sub-p'")) == 0;
  })) << relay.logs();
  // Blocked by the failed row (failed_blocks_key), and not left claimed.
  EXPECT_EQ(pg_->value("SELECT status || '/' || attempts || '/' || (claimed_by IS NULL) FROM " + t +
                       " WHERE event_id = " + sql_literal(behind)),
            "pending/0/true");
  const auto records = kafka_->read_all({topic_for("healthy")});
  std::set<std::string> ids;
  for (const KafkaRecord& r : records) ids.insert(r.header("id"));
  for (const std::string& id : healthy) EXPECT_TRUE(ids.contains(id)) << id;
  EXPECT_EQ(relay.stop(), 0) << relay.logs();
}

// `check` and `run` refuse a table the lease variant cannot use (exit 2 naming the key), as for the
// other columns; `outbox status` counts retry_wait rows as backlog and claimed rows apart.
TEST_F(RelayLeaseTest, ChecksRefuseMissingLeaseColumnsAndStatusCountsClaims) {
  create_outbox("no_lease");
  create_lease_outbox("no_claimed");
  pg_->exec("ALTER TABLE " + table("no_claimed") +
            " ADD CONSTRAINT known CHECK (status IN ('pending', 'sent', 'failed', 'retry_wait'))");
  create_outbox("text_lease");
  pg_->exec("ALTER TABLE " + table("text_lease") +
            " ADD COLUMN claimed_by text, ADD COLUMN lease_until text");
  int code = 0;
  auto missing = command(lease_yaml("no_lease"), {"check"}, {}, code);
  EXPECT_EQ(code, 2) << missing->logs();
  EXPECT_NE(missing->logs().find("tables[0].outbox.poll.owner"), std::string::npos)
      << missing->logs();
  EXPECT_NE(missing->logs().find("tables[0].outbox.poll.lease_until"), std::string::npos);
  WalrelayProcess run(lease_yaml("no_claimed"), "run");
  run.start();
  EXPECT_EQ(run.wait_exit(30s), 2) << run.logs();
  EXPECT_NE(run.logs().find("tables[0].outbox.poll.statuses.claimed"), std::string::npos)
      << run.logs();
  auto text = command(lease_yaml("text_lease"), {"check"}, {}, code);
  EXPECT_EQ(code, 2) << text->logs();
  EXPECT_NE(text->logs().find("tables[0].outbox.poll.lease_until: column \"lease_until\""),
            std::string::npos)
      << text->logs();

  create_lease_outbox("event_outbox");
  const std::string t = table("event_outbox");
  pg_->exec("INSERT INTO " + t +
            " (subscription_id, event_type, payload, status, attempts, claimed_by, lease_until) "
            "VALUES ('a', 'evt', '{}', 'pending', 0, NULL, NULL), ('b', 'evt', '{}', "
            "'retry_wait', 1, NULL, NULL), ('c', 'evt', '{}', 'claimed', 0, 'x', now() + interval "
            "'1 hour'), ('d', 'evt', '{}', 'failed', 8, NULL, NULL), ('e', 'evt', '{}', 'sent', 0, "
            "NULL, NULL)");
  auto status = command(lease_yaml("event_outbox"), {"outbox", "status"}, {"--json"}, code);
  ASSERT_EQ(code, 0) << status->logs();
  const std::string out = status->stdout_text();
  ASSERT_NE(out.find('{'), std::string::npos) << status->logs();
  const std::string doc = out.substr(out.find('{'));
  EXPECT_EQ(json_at(doc, "/tables/0/pending"), "2") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/claimed"), "1") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/failed"), "1") << doc;
  EXPECT_EQ(json_at(doc, "/tables/0/by_type/0/claimed"), "1") << doc;
  auto plain = command(lease_yaml("event_outbox"), {"outbox", "status"}, {}, code);
  ASSERT_EQ(code, 0) << plain->logs();
  EXPECT_NE(plain->stdout_text().find(t + " (tables[0]): 2 pending (with retry_wait), 1 claimed"),
            std::string::npos)
      << plain->stdout_text();
}

// The lease statements by hand (the relay's own SQL, relay/claim_sql.cpp, prepared with their
// parameter types): a live claim holds its key back and is not taken; an expired one is taken
// over by another token; the stale owner's marks then change nothing.
TEST_F(RelayLeaseTest, AStaleOwnerCannotMarkARowAnotherOwnerTookOver) {
  create_lease_outbox("event_outbox");
  config::OutboxConfig outbox;
  outbox.event_id = "event_id";
  outbox.aggregate_id = "subscription_id";
  config::OutboxPollConfig poll;
  poll.order_by = "seq";
  poll.last_error = "last_error";
  poll.owner = "claimed_by";
  poll.lease_until = "lease_until";
  poll.claimed = "claimed";
  poll.retry_wait = "retry_wait";
  relay::OutboxTable ot;
  ot.schema = schema_;
  ot.table = "event_outbox";
  ot.outbox = &outbox;
  ot.poll = &poll;
  ot.columns = {{"event_id", 2950}, {"subscription_id", 25}};
  ot.key_column = 1;
  pg_->exec("PREPARE claim(text, text, text, text, bigint, text) AS " +
            relay::lease_claim_sql(ot, 10, true));
  pg_->exec("PREPARE mark_sent(text, tid[], text, text) AS " + relay::lease_mark_sent_sql(ot));
  pg_->exec("PREPARE mark_failure(int, text, tid, text, text, text) AS " +
            relay::lease_mark_failure_sql(ot));
  pg_->exec("PREPARE release(text, tid[], text, text) AS " + relay::lease_release_sql(ot));
  const auto claim = [&](const std::string& token) {
    return pg_->query("EXECUTE claim('pending', 'retry_wait', 'claimed', " + sql_literal(token) +
                      ", 60000, 'failed')");
  };
  const std::string t = table("event_outbox");
  const std::string head = insert("event_outbox", "sub-1", "evt", "'{\"n\": 1}'");
  const std::string next = insert("event_outbox", "sub-1", "evt", "'{\"n\": 2}'");
  // The stale owner's live claim of the head: nobody takes it, nor the key's next row.
  pg_->exec("UPDATE " + t +
            " SET status = 'claimed', claimed_by = 'stale', lease_until = now() + interval '1 "
            "hour' WHERE event_id = " +
            sql_literal(head));
  EXPECT_TRUE(claim("fresh").empty());
  // Its lease passes: the fresh token takes both rows over, attempts unchanged.
  pg_->exec("UPDATE " + t +
            " SET lease_until = now() - interval '1 s' WHERE event_id = " + sql_literal(head));
  const std::string stale_tid =
      pg_->value("SELECT ctid::text FROM " + t + " WHERE event_id = " + sql_literal(head));
  const auto taken = claim("fresh");
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0][2], head);
  EXPECT_EQ(taken[1][2], next);
  EXPECT_EQ(
      pg_->value("SELECT string_agg(status || '/' || claimed_by || '/' || attempts, ',' ORDER "
                 "BY seq) FROM " +
                 t),
      "claimed/fresh/0,claimed/fresh/0");
  // The stale owner marks with the old ctid and with the current one: nothing changes.
  const std::string tid = *taken[0][0];
  for (const std::string& at : {stale_tid, tid}) {
    const std::string tids = sql_literal("{\"" + at + "\"}");
    EXPECT_TRUE(pg_->query("EXECUTE mark_sent('sent', " + tids + ", 'stale', 'claimed')").empty());
    EXPECT_TRUE(pg_->query("EXECUTE mark_failure(1, 'retry_wait', " + sql_literal(at) +
                           ", 'stale', 'claimed', 'late')")
                    .empty());
    EXPECT_TRUE(pg_->query("EXECUTE release('pending', " + tids + ", 'stale', 'claimed')").empty());
  }
  EXPECT_EQ(pg_->value("SELECT status || '/' || claimed_by || '/' || attempts || '/' || "
                       "(sent_at IS NULL) || '/' || (last_error IS NULL) FROM " +
                       t + " WHERE event_id = " + sql_literal(head)),
            "claimed/fresh/0/true/true");
  // The owner marks it: sent, the claim cleared; its key's next row goes back without an attempt.
  EXPECT_EQ(pg_->query("EXECUTE mark_sent('sent', " + sql_literal("{\"" + tid + "\"}") +
                       ", 'fresh', 'claimed')")
                .size(),
            1u);
  EXPECT_EQ(pg_->query("EXECUTE release('pending', " + sql_literal("{\"" + *taken[1][0] + "\"}") +
                       ", 'fresh', 'claimed')")
                .size(),
            1u);
  EXPECT_EQ(pg_->value("SELECT string_agg(status || '/' || coalesce(claimed_by, '-') || '/' || "
                       "attempts || '/' || (lease_until IS NULL), ',' ORDER BY seq) FROM " +
                       t),
            "sent/-/0/true,pending/-/0/true");
}

}  // namespace
}  // namespace walrelay::itest
