// The configuration loader: environment substitution, units, table names, masks, globs, files, YAML
// syntax, and the errors, heartbeat, kafka and snapshot sections.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config_test_support.hpp"
#include "walrelay/config/config.hpp"

namespace walrelay::config {
namespace {

using namespace std::chrono_literals;
using namespace walrelay::config::test;

TEST(ConfigEnv, SubstitutesScalarsBeforeInterpretation) {
  const Config config = load_ok(R"(name: ${APP}
source:
  conninfo: "host=${PGHOST} port=${PGPORT:-5432} password=${PGPASSWORD}"
  status_interval: ${INTERVAL}
kafka:
  max_in_flight_events: ${EVENTS}
  bootstrap_servers: ${KAFKA:-localhost:9092}
tables:
  - name: ${SCHEMA:-public}.orders
)",
                                env_of({{"APP", "shop"},
                                        {"PGHOST", "db"},
                                        {"PGPASSWORD", "p$$w"},
                                        {"INTERVAL", "5s"},
                                        {"EVENTS", "42"},
                                        {"SCHEMA", ""}}));
  EXPECT_EQ(config.name, "shop");
  // The value of a variable is not substituted again.
  EXPECT_EQ(config.source.conninfo, "host=db port=5432 password=p$$w");
  EXPECT_EQ(config.source.status_interval, 5s);
  EXPECT_EQ(config.kafka.max_in_flight_events, 42u);
  EXPECT_EQ(config.kafka.bootstrap_servers, "localhost:9092");
  EXPECT_EQ(config.tables.at(0).schema_pattern, "public");  // `:-` also replaces an empty value
  EXPECT_EQ(config.source.slot, "walrelay_shop");
}

TEST(ConfigEnv, UnsetVariablesAreErrorsNamingKeyAndVariable) {
  const LoadResult result = load(R"(name: app
source:
  conninfo: "host=${PGHOST}"
kafka:
  max_in_flight_events: ${EVENTS}
tables:
  - name: ${SCHEMA}.${TABLE}
)");
  EXPECT_EQ(
      keys_of(result),
      (std::vector<std::string>{"source.conninfo", "kafka.max_in_flight_events", "tables[0].name"}))
      << dump(result.errors);
  EXPECT_NE(reason_for(result, "source.conninfo").find("PGHOST is not set"), std::string::npos);
  EXPECT_NE(reason_for(result, "tables[0].name").find("SCHEMA, TABLE are not set"),
            std::string::npos);
}

TEST(ConfigEnv, ReadsTheProcessEnvironment) {
  ::setenv("WALRELAY_CONFIG_TEST_HOST", "envhost", 1);
  ::unsetenv("WALRELAY_CONFIG_TEST_UNSET");
  const LoadResult ok = load_config_text(
      with("", "kafka: {bootstrap_servers: '${WALRELAY_CONFIG_TEST_HOST}:1'}\n"), "test.yaml");
  ASSERT_TRUE(ok.config.has_value()) << dump(ok.errors);
  EXPECT_EQ(ok.config->kafka.bootstrap_servers, "envhost:1");
  const LoadResult missing = load_config_text(
      with("", "kafka: {bootstrap_servers: '${WALRELAY_CONFIG_TEST_UNSET}'}\n"), "test.yaml");
  EXPECT_EQ(keys_of(missing), std::vector<std::string>{"kafka.bootstrap_servers"});
  ::unsetenv("WALRELAY_CONFIG_TEST_HOST");
}

TEST(ConfigEnv, SubstituteEnvSyntax) {
  const EnvLookup env = env_of({{"A", "1"}, {"EMPTY", ""}});
  EXPECT_EQ(substitute_env("x${A}y", env).value(), "x1y");
  EXPECT_EQ(substitute_env("${EMPTY}", env).value(), "");
  EXPECT_EQ(substitute_env("${EMPTY:-d}", env).value(), "d");
  EXPECT_EQ(substitute_env("${NOPE:-}", env).value(), "");
  EXPECT_EQ(substitute_env("${NOPE:-a b:c}", env).value(), "a b:c");
  EXPECT_EQ(substitute_env("$${A}", env).value(), "${A}");
  EXPECT_EQ(substitute_env("a$$b", env).value(), "a$b");
  EXPECT_EQ(substitute_env("pa$word$", env).value(), "pa$word$");
  EXPECT_EQ(substitute_env("no refs", env).value(), "no refs");

  const auto unterminated = substitute_env("${A", env);
  ASSERT_FALSE(unterminated.has_value());
  EXPECT_NE(unterminated.error().find("unterminated"), std::string::npos);
  EXPECT_FALSE(substitute_env("${}", env).has_value());
  EXPECT_FALSE(substitute_env("${1A}", env).has_value());
  EXPECT_FALSE(substitute_env("${A-B}", env).has_value());
  const auto unset = substitute_env("${X}${A}${Y}", env);
  ASSERT_FALSE(unset.has_value());
  EXPECT_EQ(unset.error(),
            "environment variables X, Y are not set (use ${X:-default} for a default)");
}

TEST(ConfigUnits, Durations) {
  EXPECT_EQ(parse_duration("500").value(), 500ms);
  EXPECT_EQ(parse_duration("500ms").value(), 500ms);
  EXPECT_EQ(parse_duration("10s").value(), 10s);
  EXPECT_EQ(parse_duration("10 s").value(), 10s);
  EXPECT_EQ(parse_duration("1m").value(), 1min);
  EXPECT_EQ(parse_duration("2h").value(), 2h);
  for (const char* bad : {"", "0", "0s", "-1s", "1d", "1.5s", "abc", "s", "10S", " 1s", "1s ",
                          "99999999999999999999", "9999999999999999h"}) {
    EXPECT_FALSE(parse_duration(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_duration("abc").error(),
            "expected a positive duration such as 500ms, 10s, 1m or 1h (a bare integer is "
            "milliseconds), got \"abc\"");
  EXPECT_NE(parse_duration("9999999999999999h").error().find("too large"), std::string::npos);
}

TEST(ConfigUnits, Sizes) {
  EXPECT_EQ(parse_size("1048576").value(), 1048576u);
  EXPECT_EQ(parse_size("1B").value(), 1u);
  EXPECT_EQ(parse_size("512KiB").value(), 512u * 1024);
  EXPECT_EQ(parse_size("64MiB").value(), 64u * 1024 * 1024);
  EXPECT_EQ(parse_size("1GiB").value(), 1024u * 1024 * 1024);
  EXPECT_EQ(parse_size("2TiB").value(), 2ull << 40);
  EXPECT_EQ(parse_size("10MB").value(), 10'000'000u);
  EXPECT_EQ(parse_size("10 mb").value(), 10'000'000u);
  EXPECT_EQ(parse_size("3kb").value(), 3000u);
  for (const char* bad : {"", "0", "0MiB", "-1", "abc", "1.5MiB", "10XB", "MiB", "20000000TiB",
                          "99999999999999999999"}) {
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  }
  EXPECT_NE(parse_size("20000000TiB").error().find("too large"), std::string::npos);
}

TEST(ConfigTableName, SplitsOnFirstUnquotedDot) {
  const auto check = [](std::string_view text, std::string_view schema, std::string_view table) {
    const auto parsed = parse_table_name(text);
    ASSERT_TRUE(parsed.has_value()) << text << ": " << parsed.error();
    EXPECT_EQ(parsed->schema, schema) << text;
    EXPECT_EQ(parsed->table, table) << text;
  };
  check("public.invoices", "public", "invoices");
  check("Public.MyTable", "Public", "MyTable");
  check(R"("my.schema"."Weird ""T""")", "my.schema", "Weird \"T\"");
  check(R"("a.b".c)", "a.b", "c");
  check(R"(a."b.c")", "a", "b.c");
  check(R"("""".x)", "\"", "x");
  check("a.b.c", "a", "b.c");  // unquoted parts are verbatim
  check("*.*", "*", "*");
  check("app_*.event_*", "app_*", "event_*");
}

TEST(ConfigTableName, Errors) {
  for (const char* bad : {"", "noschema", ".t", "s.", R"("unterminated.t)", R"("a"x.t)",
                          R"(a."b"x)", R"("".t)", R"(s."")", R"("no.dot")", R"(s."t)"}) {
    const auto parsed = parse_table_name(bad);
    EXPECT_FALSE(parsed.has_value()) << bad;
  }
  EXPECT_NE(parse_table_name("noschema").error().find("expected schema.table"), std::string::npos);
  EXPECT_NE(parse_table_name(R"("no.dot")").error().find("expected schema.table"),
            std::string::npos);
}

TEST(ConfigMask, KeywordValueForm) {
  EXPECT_EQ(mask_conninfo("host=db password=secret user=u"), "host=db password=**** user=u");
  EXPECT_EQ(mask_conninfo("password='a b' host=db"), "password=**** host=db");
  EXPECT_EQ(mask_conninfo(R"(password = 'it\'s a secret' host=x)"), "password = **** host=x");
  EXPECT_EQ(mask_conninfo(R"(password=a\ b host=x)"), "password=**** host=x");
  EXPECT_EQ(mask_conninfo("host=x sslpassword=k"), "host=x sslpassword=****");
  EXPECT_EQ(mask_conninfo("host=x password="), "host=x password=****");
  EXPECT_EQ(mask_conninfo("host=127.0.0.1 port=5432 dbname=app user=walrelay"),
            "host=127.0.0.1 port=5432 dbname=app user=walrelay");
  EXPECT_EQ(mask_conninfo(""), "");
  // libpq would reject this, and the error path may log it: hide what follows the keyword.
  EXPECT_EQ(mask_conninfo("host=x password secret"), "host=x password ****");
  EXPECT_EQ(mask_conninfo("password='unterminated host=x"), "password=****");
}

TEST(ConfigMask, UriForm) {
  EXPECT_EQ(mask_conninfo("postgresql://user:secret@host/db"), "postgresql://user:****@host/db");
  EXPECT_EQ(mask_conninfo("postgres://user:secret@host:5432"), "postgres://user:****@host:5432");
  EXPECT_EQ(mask_conninfo("postgresql://user@host/db"), "postgresql://user@host/db");
  EXPECT_EQ(mask_conninfo("postgresql://host/db"), "postgresql://host/db");
  EXPECT_EQ(mask_conninfo("postgresql://u:p@ss@host/db"), "postgresql://u:****@host/db");
  EXPECT_EQ(mask_conninfo("postgresql://host/db?sslmode=require&password=x&user=u"),
            "postgresql://host/db?sslmode=require&password=****&user=u");
  EXPECT_EQ(mask_conninfo("postgresql:///db?password=x"), "postgresql:///db?password=****");
}

TEST(ConfigMask, DbnameHoldingAConnectionString) {
  // libpq expands a dbname that looks like a conninfo string or URI (docs §34.1.2).
  EXPECT_EQ(mask_conninfo("dbname='postgresql://u:pw@h/db' connect_timeout=5"),
            "dbname='postgresql://u:****@h/db' connect_timeout=5");
  EXPECT_EQ(mask_conninfo("dbname='host=h password=pw'"), "dbname='host=h password=****'");
  EXPECT_EQ(mask_conninfo("dbname=app"), "dbname=app");
}

TEST(ConfigMask, SecretProperties) {
  for (const char* secret :
       {"sasl.password", "SASL.USERNAME", "sasl.oauthbearer.config", "ssl.keystore.password",
        "ssl.key.password", "ssl.key.pem", "my.Secret.thing", "PASSWORD"}) {
    EXPECT_TRUE(is_secret_property(secret)) << secret;
  }
  for (const char* plain : {"compression.type", "ssl.ca.location", "bootstrap.servers",
                            "security.protocol", "xsasl.mechanism"}) {
    EXPECT_FALSE(is_secret_property(plain)) << plain;
  }
}

TEST(ConfigGlob, Matches) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("", ""));
  EXPECT_FALSE(glob_match("", "a"));
  EXPECT_TRUE(glob_match("invoices", "invoices"));
  EXPECT_FALSE(glob_match("invoices", "invoices2"));
  EXPECT_TRUE(glob_match("pub*", "public"));
  EXPECT_TRUE(glob_match("*_outbox", "event_outbox"));
  EXPECT_FALSE(glob_match("*_outbox", "event_outbox_old"));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_TRUE(glob_match("a**c", "ac"));
  EXPECT_FALSE(glob_match("a*b*c", "aXbYbZ"));
  EXPECT_FALSE(glob_match("Public", "public"));  // case-sensitive
  EXPECT_TRUE(glob_match("a?c", "a?c"));         // only `*` is special
  EXPECT_FALSE(glob_match("a?c", "abc"));
  EXPECT_TRUE(glob_match("a.b", "a.b"));
  EXPECT_FALSE(glob_match("a.b", "axb"));
  // Would take exponential time with naive recursion.
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*b", std::string(200, 'a')));
}

TEST(ConfigFile, UnreadableFileIsOneError) {
  const LoadResult missing = load_config_file("/nonexistent/walrelay.yaml");
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0].key, "");
  EXPECT_EQ(missing.errors[0].reason,
            "cannot read /nonexistent/walrelay.yaml: No such file or directory");
  EXPECT_FALSE(missing.config.has_value());

  const LoadResult directory = load_config_file("/");
  ASSERT_EQ(directory.errors.size(), 1u);
  EXPECT_EQ(directory.errors[0].reason, "cannot read /: Is a directory");
}

TEST(ConfigFile, LoadsAFile) {
  const std::string path = ::testing::TempDir() + "walrelay_config_test.yaml";
  {
    std::ofstream out(path);
    out << kMinimal;
  }
  const LoadResult result = load_config_file(path);
  std::remove(path.c_str());
  ASSERT_TRUE(result.config.has_value()) << dump(result.errors);
  EXPECT_EQ(result.config->name, "app");
}

// The configurations the repository ships load without errors: docker/walrelay.yaml (compose),
// the Kubernetes ConfigMap's walrelay.yaml (deploy/kubernetes/configmap.yaml), the demo's and its
// poll-mode variant (examples/demo-poll.yaml).
TEST(ConfigFile, ShippedConfigurationsLoad) {
  const std::string root = WALRELAY_SOURCE_DIR;
  const EnvLookup env = env_of({{"WALRELAY_PG_PASSWORD", "secret"},
                                {"DEMO_PG_CONNINFO", "host=db"},
                                {"DEMO_STATE_DIR", "/tmp/x"},
                                {"DEMO_KAFKA_BOOTSTRAP", "k:9092"}});
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const char* file :
       {"/docker/walrelay.yaml", "/examples/demo.yaml", "/examples/demo-poll.yaml"}) {
    const LoadResult result = load_config_text(read(root + file), file, env);
    EXPECT_TRUE(result.config.has_value()) << file << "\n" << dump(result.errors);
  }
  // The ConfigMap holds the file as a literal block under `walrelay.yaml: |`, indented by 4.
  const std::string configmap = read(root + "/deploy/kubernetes/configmap.yaml");
  const auto at = configmap.find("walrelay.yaml: |\n");
  ASSERT_NE(at, std::string::npos);
  std::string embedded;
  std::istringstream lines(configmap.substr(at + 17));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && !line.starts_with("    ")) break;
    embedded += (line.size() >= 4 ? line.substr(4) : std::string()) + "\n";
  }
  const LoadResult result = load_config_text(embedded, "configmap.yaml", env);
  ASSERT_TRUE(result.config.has_value()) << embedded << dump(result.errors);
  EXPECT_EQ(result.config->metrics.listen, "0.0.0.0:9187");  // probes come from outside the pod
  EXPECT_EQ(result.config->source.state_dir, "/var/lib/walrelay");  // the mounted volume
  EXPECT_NE(result.config->source.conninfo.find("password='secret'"), std::string::npos);
}

TEST(ConfigSyntax, YamlSyntaxErrorIsOneErrorWithPosition) {
  const LoadResult result = load("name: app\nsource: [unclosed\n");
  ASSERT_EQ(result.errors.size(), 1u) << dump(result.errors);
  EXPECT_EQ(result.errors[0].key, "");
  EXPECT_TRUE(result.errors[0].reason.starts_with("test.yaml: YAML syntax error at line "))
      << result.errors[0].reason;
  EXPECT_NE(result.errors[0].reason.find("column"), std::string::npos);

  const LoadResult tabs = load("name: app\nsource:\n\tconninfo: x\n");
  ASSERT_EQ(tabs.errors.size(), 1u) << dump(tabs.errors);
  EXPECT_EQ(tabs.errors[0].key, "");
}

TEST(ConfigSyntax, SeveralDocumentsAreAnError) {
  const LoadResult result = load(std::string(kMinimal) + "---\nname: other\n");
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].key, "");
  // Documents are counted only up to two (yaml-cpp 0.7 never stops counting on some inputs).
  EXPECT_NE(result.errors[0].reason.find("expected one YAML document, found several"),
            std::string::npos);
}

// ---- reliability keys: errors, heartbeat, slot record, reconnect --------------------------------

TEST(ConfigReliability, DefaultsWhenAbsent) {
  auto r = load_with("");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].key + ": " + r.errors[0].reason);
  EXPECT_EQ(walrelay::config::to_string(r.config->errors.policy), "fail");
  EXPECT_TRUE(r.config->heartbeat.enabled);
  EXPECT_EQ(r.config->heartbeat.interval, std::chrono::seconds(10));
  EXPECT_TRUE(r.config->source.state_dir.empty());
  EXPECT_FALSE(r.config->source.allow_slot_reset);
  EXPECT_FALSE(r.config->source.allow_sql_ascii);
  EXPECT_EQ(r.config->source.reconnect_min, std::chrono::milliseconds(500));
  EXPECT_EQ(r.config->source.reconnect_max, std::chrono::seconds(30));
}

TEST(ConfigReliability, EveryKeyIsRead) {
  auto r = load_with(
      "  state_dir: /var/lib/walrelay\n  allow_slot_reset: true\n  allow_sql_ascii: true\n"
      "  reconnect_min: 1s\n"
      "  reconnect_max: 1m\nerrors:\n  policy: dead_letter\n  dead_letter_topic: billing.dlq\n"
      "heartbeat:\n  enabled: false\n  interval: 2s\n  query: \"UPDATE hb SET at = now()\"\n");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].key + ": " + r.errors[0].reason);
  const auto& c = *r.config;
  EXPECT_EQ(c.source.state_dir, "/var/lib/walrelay");
  EXPECT_TRUE(c.source.allow_slot_reset);
  EXPECT_TRUE(c.source.allow_sql_ascii);
  EXPECT_EQ(c.source.reconnect_min, std::chrono::seconds(1));
  EXPECT_EQ(c.source.reconnect_max, std::chrono::minutes(1));
  EXPECT_EQ(walrelay::config::to_string(c.errors.policy), "dead_letter");
  EXPECT_EQ(c.errors.dead_letter_topic, "billing.dlq");
  EXPECT_FALSE(c.heartbeat.enabled);
  EXPECT_EQ(c.heartbeat.interval, std::chrono::seconds(2));
  EXPECT_EQ(c.heartbeat.query, "UPDATE hb SET at = now()");
}

TEST(ConfigReliability, MistakesAreReportedTogether) {
  auto r = load_with(
      "  reconnect_min: 1m\n  reconnect_max: 1s\nerrors:\n  policy: retry\n"
      "heartbeat:\n  interval: soon\n  querry: x\n");
  EXPECT_FALSE(r.config);
  EXPECT_TRUE(has_error(r, "source.reconnect_min"));
  EXPECT_TRUE(has_error(r, "errors.policy"));
  EXPECT_TRUE(has_error(r, "heartbeat.interval"));
  EXPECT_TRUE(has_error(r, "heartbeat.querry"));
  // Booleans are booleans: a typo is an error naming the key, never a silent false.
  auto sql_ascii = load_with("  allow_sql_ascii: maybe\n");
  EXPECT_FALSE(sql_ascii.config);
  EXPECT_TRUE(has_error(sql_ascii, "source.allow_sql_ascii"));
  auto dlq = load_with("errors:\n  policy: dead_letter\n");
  EXPECT_TRUE(has_error(dlq, "errors.dead_letter_topic"));
  auto bad_topic = load_with("errors:\n  policy: dead_letter\n  dead_letter_topic: \"a b\"\n");
  EXPECT_TRUE(has_error(bad_topic, "errors.dead_letter_topic"));
}

TEST(ConfigMask, MalformedTailAfterAPasswordIsMasked) {
  // libpq reads `password=Pg-S3cret` and fails on `Tail-S3cret-Part`: both may be the password.
  const std::string masked =
      walrelay::config::mask_conninfo("host=x password=Pg-S3cret Tail-S3cret-Part dbname=app");
  EXPECT_EQ(masked.find("S3cret"), std::string::npos) << masked;
  EXPECT_EQ(masked.rfind("host=x password=****", 0), 0u) << masked;
}

// Found by tests/fuzz/fuzz_config: yaml-cpp 0.7's LoadAll never returns on a leading comma.
TEST(ConfigSyntax, LeadingCommaIsAnErrorNotAnEndlessLoad) {
  for (const char* text : {",", "# comment\n, name: app", "name: a\n---\n,"}) {
    auto r = walrelay::config::load_config_text(text, "test.yaml");
    EXPECT_FALSE(r.config) << text;
    EXPECT_FALSE(r.errors.empty()) << text;
  }
}

TEST(ConfigKafka, PropertiesThatBreakTheDeliveryGuaranteeAreRefused) {
  auto r = walrelay::config::load_config_text(
      "name: b\nsource:\n  conninfo: x\nkafka:\n  properties:\n    acks: 0\n"
      "    enable.idempotence: false\n    compression.type: lz4\ntables:\n  - name: public.t\n",
      "test.yaml");
  EXPECT_FALSE(r.config);
  std::set<std::string> keys;
  for (const auto& e : r.errors) keys.insert(e.key);
  EXPECT_TRUE(keys.contains("kafka.properties.acks"));
  EXPECT_TRUE(keys.contains("kafka.properties.enable.idempotence"));
  EXPECT_FALSE(keys.contains("kafka.properties.compression.type"));
}

// ---- snapshot keys
// --------------------------------------------------------------------------------

TEST(ConfigSnapshot, DefaultsAreAnInitialSnapshotInChunksOf8192) {
  auto r = load_with("");
  ASSERT_TRUE(r.config);
  EXPECT_EQ(walrelay::config::to_string(r.config->snapshot.mode), "initial");
  EXPECT_EQ(r.config->snapshot.chunk_size, 8192u);
  EXPECT_EQ(r.config->snapshot.parallelism, 1u);
  EXPECT_EQ(r.config->snapshot.max_window_keys, 65536u);
  EXPECT_FALSE(r.config->snapshot.row_security);
}

TEST(ConfigSnapshot, MaxWindowKeysIsAtLeast1024) {
  auto r = load_with("snapshot:\n  max_window_keys: 4096\n");
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->snapshot.max_window_keys, 4096u);
  for (const char* bad : {"0", "1023", "-5", "many"}) {
    auto b = load_with(std::string("snapshot:\n  max_window_keys: ") + bad + "\n");
    EXPECT_FALSE(b.config) << bad;
    EXPECT_TRUE(has_error(b, "snapshot.max_window_keys")) << bad;
  }
}

TEST(ConfigSnapshot, EveryKeyIsReadAndMistakesNameTheKey) {
  auto r = load_with(
      "snapshot:\n  mode: initial_only\n  chunk_size: 500\n  parallelism: 4\n  row_security: "
      "true\n");
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].key + ": " + r.errors[0].reason);
  EXPECT_EQ(walrelay::config::to_string(r.config->snapshot.mode), "initial_only");
  EXPECT_EQ(r.config->snapshot.chunk_size, 500u);
  EXPECT_EQ(r.config->snapshot.parallelism, 4u);
  EXPECT_TRUE(r.config->snapshot.row_security);
  auto bad =
      load_with("snapshot:\n  mode: always\n  chunk_size: 0\n  parallelism: 17\n  fetch_size: 3\n");
  auto huge = load_with("snapshot:\n  chunk_size: 2147483648\n");
  EXPECT_FALSE(huge.config);
  EXPECT_TRUE(has_error(huge, "snapshot.chunk_size"));
  EXPECT_FALSE(bad.config);
  EXPECT_TRUE(has_error(bad, "snapshot.mode"));
  EXPECT_TRUE(has_error(bad, "snapshot.chunk_size"));
  EXPECT_TRUE(has_error(bad, "snapshot.parallelism"));
  EXPECT_TRUE(has_error(bad, "snapshot.fetch_size"));
}

}  // namespace
}  // namespace walrelay::config
