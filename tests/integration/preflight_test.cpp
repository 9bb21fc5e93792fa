// Issue 10: `walrelay check` runs every check `run` runs before it creates a slot, through the
// same functions (config loading; preflight.hpp for the tables), so the two agree: the same exit
// code, and check's FAIL line is run's error, naming the same key or table. Each configuration
// below is given to both commands.

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

class PreflightTest : public IntegrationTest {
 protected:
  struct Outcome {
    int rc = 0;
    std::string out;  // check: stdout; run: stderr
  };

  Outcome check(const std::string& yaml, const std::string& label) {
    WalrelayProcess proc(yaml, "walrelay check (" + label + ")");
    proc.start({"check", "--config", proc.config_path().string()});
    Outcome o;
    o.rc = proc.wait_exit(60s);
    o.out = proc.stdout_text() + proc.stderr_text();
    return o;
  }

  Outcome run(const std::string& yaml, const std::string& label) {
    WalrelayProcess proc(yaml, "walrelay run (" + label + ")");
    proc.start();
    Outcome o;
    o.rc = proc.wait_exit(60s);
    if (o.rc == WalrelayProcess::kTimedOut) o.rc = -1;
    o.out = proc.stderr_text();
    return o;
  }

  // Both commands on `yaml`: run exits `rc` (2: refused, naming `subject`), and check agrees.
  void expect_agreement(const std::string& label, const std::string& yaml, int rc,
                        const std::string& subject) {
    SCOPED_TRACE(label);
    const Outcome r = run(yaml, label);
    const Outcome c = check(yaml, label);
    EXPECT_EQ(r.rc, rc) << r.out;
    EXPECT_EQ(c.rc, r.rc) << "check:\n" << c.out << "\nrun:\n" << r.out;
    EXPECT_NE(r.out.find(subject), std::string::npos) << r.out;
    EXPECT_NE(c.out.find(subject), std::string::npos) << c.out;
    // run's reason, as check prints it.
    const auto at = r.out.find(" error ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string reason = r.out.substr(at + 7, r.out.find('\n', at) - at - 7);
    EXPECT_NE(c.out.find("FAIL: " + reason), std::string::npos)
        << "check does not print run's reason '" << reason << "':\n"
        << c.out;
    EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "a refused configuration left a slot";
  }

  // The lines of `text` that start with two spaces (a config error's "  key: reason").
  static std::string error_lines(const std::string& text) {
    std::string out;
    std::size_t at = 0;
    while (at < text.size()) {
      const auto end = text.find('\n', at);
      const std::string line = text.substr(at, end == std::string::npos ? end : end - at);
      if (line.starts_with("  ")) out += line + "\n";
      if (end == std::string::npos) break;
      at = end + 1;
    }
    return out;
  }

  // Inserts `lines` right after the line `section` (e.g. "source:\n") of `yaml`.
  static std::string insert_after(std::string yaml, const std::string& section,
                                  const std::string& lines) {
    const auto at = yaml.find(section);
    if (at == std::string::npos) return yaml + section + lines;
    return yaml.insert(at + section.size(), lines);
  }
};

// Invalid configurations (from the config test suite, tests/unit/config_test.cpp): both commands
// load the file with the same function and exit 2 with the same lines naming the key.
TEST_F(PreflightTest, InvalidConfigurationsAreRefusedAlikeNamingTheKey) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY)");
  const std::string base = make_config({{table("t")}}).to_yaml();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"source.status_interval_x", insert_after(base, "source:\n", "  status_interval_x: 1s\n")},
      {"kafka.max_in_flight_events", insert_after(base, "kafka:\n", "  max_in_flight_events: 0\n")},
      {"events.value_format", base + "events:\n  value_format: avro\n"},
      {"kafak", base + "kafak: {}\n"},
      {"source.create_slot", insert_after(base, "source:\n", "  create_slot: maybe\n")},
      {"tables[0].name", insert_after(base, "tables:\n", "  - name: nodot\n")},
  };
  for (const auto& [key, yaml] : cases) {
    SCOPED_TRACE(key);
    const Outcome r = run(yaml, key);
    const Outcome c = check(yaml, key);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_EQ(c.rc, 2) << c.out;
    EXPECT_NE(r.out.find("  " + key + ": "), std::string::npos) << r.out;
    EXPECT_EQ(error_lines(c.out), error_lines(r.out)) << c.out << "\n" << r.out;
  }
}

// The table rules (preflight.hpp), each on its own configuration; then a configuration both
// accept.
TEST_F(PreflightTest, TableRulesAreAppliedAlikeByCheckAndRun) {
  pg_->exec("CREATE TABLE " + table("ri") + " (id int PRIMARY KEY, ext int NOT NULL)");
  pg_->exec("CREATE UNIQUE INDEX " + name_ + "_ri_ext ON " + table("ri") + " (ext)");
  pg_->exec("ALTER TABLE " + table("ri") + " REPLICA IDENTITY USING INDEX " + name_ + "_ri_ext");
  pg_->exec("CREATE TABLE " + table("ob") + " (id uuid PRIMARY KEY, aggregateid text)");
  pg_->exec("CREATE TABLE " + table("a_b") + " (id int PRIMARY KEY)");
  pg_->exec("CREATE TABLE \"" + name_ + "\".\"a.b\" (id int PRIMARY KEY)");
  pg_->exec("CREATE VIEW " + table("v") + " AS SELECT 1 AS x");
  pg_->exec("CREATE TABLE " + table("plain") + " (id int PRIMARY KEY)");

  expect_agreement("primary key and REPLICA IDENTITY USING INDEX",
                   make_config({{table("ri")}}).to_yaml(), 2, table("ri"));
  expect_agreement("outbox without a configured column",
                   make_config({{table("ob"), {"topic: \"x.{aggregate_type}\""}}}).to_yaml(), 2,
                   table("ob"));
  expect_agreement("two tables on one topic", make_config({{table("a*")}}).to_yaml(), 2,
                   table("a_b"));
  expect_agreement("a view named in tables", make_config({{table("v")}}).to_yaml(), 2, table("v"));
  {
    auto cfg = make_config({{table("plain")}});
    std::string yaml = cfg.to_yaml();
    yaml = insert_after(yaml, "  - name: \"" + table("plain") + "\"\n",
                        "    topic: \"" + std::string(250, 'x') + "\"\n");
    expect_agreement("a topic longer than 249 characters", yaml, 2, table("plain"));
  }
  // key_columns resolves the REPLICA IDENTITY rule: both accept.
  {
    std::string yaml = make_config({{table("ri")}, {table("plain")}}).to_yaml();
    yaml = insert_after(yaml, "  - name: \"" + table("ri") + "\"\n", "    key_columns: [ext]\n");
    const Outcome c = check(yaml, "accepted");
    EXPECT_EQ(c.rc, 0) << c.out;
    WalrelayProcess proc(yaml, "walrelay run (accepted)");
    start_streaming(proc, name_);
    ASSERT_TRUE(stop_gracefully(proc, name_));
  }
}

// A producer property librdkafka rejects (an unknown name, a value of the wrong kind): `run`
// exits 2 before it connects anywhere, and `check` exits 2 too, naming the property.
TEST_F(PreflightTest, KafkaPropertyLibrdkafkaRejectsIsExit2ForBoth) {
  pg_->exec("CREATE TABLE " + table("plain") + " (id int PRIMARY KEY)");
  const std::string base = make_config({{table("plain")}}).to_yaml();
  expect_agreement("unknown property",
                   insert_after(base, "kafka:\n", "  properties: {linger.msx: 5}\n"), 2,
                   "kafka.properties.linger.msx");
  expect_agreement("invalid value",
                   insert_after(base, "kafka:\n", "  properties: {linger.ms: fast}\n"), 2,
                   "kafka.properties.linger.ms");
}

// A role without SELECT on a captured table: `run` starts, but its snapshot fails with
// `permission denied`. `check` FAILs naming the table and the GRANT (exit 1: a grant, not the
// configuration), unless snapshot.mode is never.
TEST_F(PreflightTest, CheckFailsWithoutSelectOnATableTheSnapshotReads) {
  const std::string role = name_ + "_nosel";
  const ScopedRole scoped_role(*pg_, role);
  pg_->exec("CREATE TABLE " + table("granted") + " (id int PRIMARY KEY)");
  pg_->exec("CREATE TABLE " + table("secret") + " (id int PRIMARY KEY)");
  pg_->exec("GRANT USAGE ON SCHEMA " + schema_ + " TO " + sql_ident(role));
  pg_->exec("GRANT SELECT ON " + table("granted") + " TO " + sql_ident(role));
  auto cfg = make_config({{table("granted")}, {table("secret")}});
  cfg.conninfo += " user=" + role;
  cfg.snapshot_mode = "initial";
  const Outcome c = check(cfg.to_yaml(), "no SELECT");
  EXPECT_EQ(c.rc, 1) << c.out;
  EXPECT_NE(c.out.find("has no SELECT privilege on " + table("secret")), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("GRANT SELECT ON \"" + schema_ + "\".\"secret\" TO \"" + role + "\";"),
            std::string::npos)
      << c.out;
  EXPECT_EQ(c.out.find("privilege on " + table("granted")), std::string::npos) << c.out;
  cfg.snapshot_mode = "never";
  const Outcome never = check(cfg.to_yaml(), "no SELECT, no snapshot");
  EXPECT_EQ(never.rc, 0) << never.out;
  pg_->exec("GRANT SELECT ON " + table("secret") + " TO " + sql_ident(role));
  cfg.snapshot_mode = "initial";
  const Outcome granted = check(cfg.to_yaml(), "granted");
  EXPECT_EQ(granted.rc, 0) << granted.out;
}

// key_columns and mask_columns naming a column the table does not have (a typo): refused by both
// commands, naming the table, the setting and the column (never keyed by the whole row, never
// published unmasked). A glob's mask column need only exist in some of its tables.
TEST_F(PreflightTest, KeyAndMaskColumnsTheTableDoesNotHaveAreRefused) {
  pg_->exec("CREATE TABLE " + table("customers") + " (id int PRIMARY KEY, email text)");
  pg_->exec("CREATE TABLE " + table("orders") + " (id int PRIMARY KEY, total int)");
  const std::string entry = "  - name: \"" + table("customers") + "\"\n";
  const std::string salt = "events:\n  mask_salt: pepper\n";
  {
    std::string yaml = make_config({{table("customers")}}).to_yaml();
    yaml = insert_after(yaml, entry, "    key_columns: [mail]\n");
    expect_agreement(
        "key_columns typo", yaml, 2,
        "table " + table("customers") + " has no column mail named in its key_columns");
  }
  {
    std::string yaml = make_config({{table("customers")}}).to_yaml() + salt;
    yaml = insert_after(yaml, entry, "    mask_columns: [emial]\n");
    expect_agreement(
        "mask_columns typo", yaml, 2,
        "table " + table("customers") + " has no column emial named in its mask_columns");
  }
  {
    // A glob: `email` exists in customers only (accepted below); `emial` in none of them.
    std::string yaml = make_config({{table("*")}}).to_yaml() + salt;
    yaml = insert_after(yaml, "  - name: \"" + table("*") + "\"\n", "    mask_columns: [emial]\n");
    expect_agreement("glob mask_columns typo", yaml, 2,
                     "'" + table("*") + "' names emial in its mask_columns");
  }
  {
    std::string yaml = make_config({{table("*")}}).to_yaml() + salt;
    yaml = insert_after(yaml, "  - name: \"" + table("*") + "\"\n", "    mask_columns: [email]\n");
    const Outcome c = check(yaml, "glob mask accepted");
    EXPECT_EQ(c.rc, 0) << c.out;
  }
}

// Issue 25 item 6: `tables: [{name: public.*}, {name: public.event_outbox, outbox: {}}]` published
// the outbox as row changes without a word (the first matching entry wins). An entry an earlier
// one covers for every table it names is refused by both commands, naming both entries.
TEST_F(PreflightTest, TablesEntryShadowedByAnEarlierGlobIsRefusedNamingBoth) {
  pg_->exec("CREATE TABLE " + table("event_outbox") +
            " (id uuid PRIMARY KEY, aggregatetype text, aggregateid text, payload jsonb)");
  const std::string yaml =
      make_config({{table("*")}, {table("event_outbox"), {"event_id: id"}}}).to_yaml();
  const Outcome r = run(yaml, "shadowed outbox");
  const Outcome c = check(yaml, "shadowed outbox");
  const std::string reason = "tables[1].name: entry \"" + table("event_outbox") +
                             "\" is never used: the earlier entry \"" + table("*") +
                             "\" (tables[0]) matches every table it names";
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(c.rc, 2) << c.out;
  EXPECT_NE(r.out.find(reason), std::string::npos) << r.out;
  EXPECT_EQ(error_lines(c.out), error_lines(r.out)) << c.out << "\n" << r.out;
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "a refused configuration left a slot";
  // The named entry first: accepted, the outbox is an outbox.
  const Outcome ok =
      check(make_config({{table("event_outbox"), {"event_id: id"}}, {table("*")}}).to_yaml(),
            "named first");
  EXPECT_EQ(ok.rc, 0) << ok.out;
  EXPECT_NE(ok.out.find(table("event_outbox") + ": outbox"), std::string::npos) << ok.out;
}

// Issue 25 item 8: `key_columns: [serial]` on a nullable column gave three rows one Kafka key
// without a word. Both commands warn (it may never hold NULL); a NOT NULL column is no warning.
TEST_F(PreflightTest, NullableKeyColumnsAreWarnedAboutByCheckAndRun) {
  pg_->exec("CREATE TABLE " + table("devices") + " (id int PRIMARY KEY, serial text)");
  std::string yaml = make_config({{table("devices")}}).to_yaml();
  yaml =
      insert_after(yaml, "  - name: \"" + table("devices") + "\"\n", "    key_columns: [serial]\n");
  const std::string warning = "table " + table("devices") +
                              " keys its events by key_columns [serial], but serial allows NULL";
  const Outcome c = check(yaml, "nullable key column");
  EXPECT_EQ(c.rc, 0) << c.out;
  EXPECT_NE(c.out.find("WARN: " + warning), std::string::npos) << c.out;
  {
    WalrelayProcess proc(yaml, "walrelay run (nullable key column)");
    start_streaming(proc, name_);
    ASSERT_TRUE(stop_gracefully(proc, name_));
    EXPECT_NE(proc.stderr_text().find(warning), std::string::npos) << proc.logs();
  }
  pg_->exec("ALTER TABLE " + table("devices") + " ALTER COLUMN serial SET NOT NULL");
  const Outcome not_null = check(yaml, "NOT NULL key column");
  EXPECT_EQ(not_null.rc, 0) << not_null.out;
  EXPECT_EQ(not_null.out.find("allows NULL"), std::string::npos) << not_null.out;
}

// The slot rules (preflight.hpp): a slot walrelay streamed that is gone (exit 5), and a missing
// slot walrelay may not create (exit 1).
TEST_F(PreflightTest, SlotRulesAreAppliedAlikeByCheckAndRun) {
  pg_->exec("CREATE TABLE " + table("plain") + " (id int PRIMARY KEY)");
  const auto cfg = make_config({{table("plain")}});
  {
    WalrelayProcess first(cfg.to_yaml(), "walrelay run (first)");
    start_streaming(first, name_);
    ASSERT_TRUE(stop_gracefully(first, name_));
  }
  drop_slot_quietly(*pg_, name_);
  expect_agreement("a dropped slot walrelay streamed", cfg.to_yaml(), 5,
                   "replication slot '" + name_ + "' no longer exists");
  auto other = cfg;
  other.slot = name_ + "_x";
  std::string yaml = other.to_yaml();
  yaml.replace(yaml.find("create_slot: true"), 17, "create_slot: false");
  expect_agreement("create_slot false", yaml, 1, "source.create_slot is false");
}

// Kafka that does not answer on the first start (a wrong kafka.bootstrap_servers): walrelay says
// so naming the setting, creates no slot (it would retain WAL for nothing) and waits, retrying, as
// in any Kafka outage; SIGTERM stops it at once. `check` fails on the same setting.
TEST_F(PreflightTest, NoSlotIsCreatedWhileKafkaDoesNotAnswer) {
  pg_->exec("CREATE TABLE " + table("plain") + " (id int PRIMARY KEY)");
  pg_->exec("INSERT INTO " + table("plain") + " SELECT generate_series(1, 100)");
  auto cfg = make_config({{table("plain")}});
  cfg.snapshot_mode = "initial";
  cfg.bootstrap = "127.0.0.1:1";  // nothing listens there
  WalrelayProcess proc(cfg.to_yaml(), "walrelay run (unreachable Kafka)");
  proc.start();
  ASSERT_TRUE(proc.wait_for_log("kafka.bootstrap_servers 127.0.0.1:1", 60s)) << proc.logs();
  ASSERT_TRUE(proc.wait_for_log("reconnecting in", 30s)) << proc.logs();
  EXPECT_TRUE(proc.running()) << proc.logs();
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << proc.logs();
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(proc.stop(SIGTERM, 60s), 0) << proc.logs();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 15s) << proc.logs();
  EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << proc.logs();
  const Outcome c = check(cfg.to_yaml(), "unreachable Kafka");
  EXPECT_EQ(c.rc, 1) << c.out;
  EXPECT_NE(c.out.find("kafka: 127.0.0.1:1"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace walrelay::itest
