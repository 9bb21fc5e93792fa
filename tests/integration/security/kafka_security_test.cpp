// Kafka over TLS and SASL against the real broker of tests/services/start.sh, whose SASL_SSL
// listener (WALRELAY_TEST_KAFKA_SASL_BOOTSTRAP) has a certificate signed by the CA
// WALRELAY_TEST_KAFKA_CA, a SCRAM-SHA-512 user and a PLAIN user. walrelay gets the settings through
// `kafka.properties` (docs/configuration.md), as a user of a managed Kafka would give them:
//   1. PLAIN over TLS: `walrelay check` reaches the broker, `walrelay run` streams, the records
//      read back over the same listener.
//   2. SCRAM-SHA-512 over TLS: the same; with a librdkafka older than 2.6.1 (Debian 12 has 2.0.2)
//      an Apache Kafka 4.x broker refuses its SCRAM proof even with the right password
//      (librdkafka CHANGELOG.md, v2.6.1): then check and run stop with exit 7 and say so.
//   3. A wrong password: check and run exit 7 (ExitCode::kKafkaAuthFailed) naming the refused
//      credentials, without printing the password.
//   4. A broker certificate that does not verify (no ssl.ca.location: the system's CAs; another
//      CA): check and run exit 7, naming the failed TLS handshake.
// Each test makes its own names and touches nothing shared: the suite runs in parallel.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

namespace fs = std::filesystem;
using Properties = std::vector<std::pair<std::string, std::string>>;

/// The SASL_SSL listener's settings (tests/services/start.sh writes them).
struct SaslEnv {
  std::string bootstrap;       ///< WALRELAY_TEST_KAFKA_SASL_BOOTSTRAP
  std::string ca;              ///< WALRELAY_TEST_KAFKA_CA: PEM file of the CA
  std::string scram_user;      ///< WALRELAY_TEST_KAFKA_SASL_USER (SCRAM-SHA-512)
  std::string scram_password;  ///< WALRELAY_TEST_KAFKA_SASL_PASSWORD
  std::string plain_user;      ///< WALRELAY_TEST_KAFKA_PLAIN_USER
  std::string plain_password;  ///< WALRELAY_TEST_KAFKA_PLAIN_PASSWORD
};

/// librdkafka's first version whose SCRAM works with Apache Kafka 4.x brokers.
constexpr int kScramFixedVersion = 0x020601ff;

/// `kafka.properties` for SASL over TLS with `mechanism`, the given credentials and, unless
/// `ca` is empty, ssl.ca.location.
Properties sasl_ssl(const std::string& mechanism, const std::string& user,
                    const std::string& password, const std::string& ca) {
  Properties p = {{"security.protocol", "SASL_SSL"},
                  {"sasl.mechanisms", mechanism},
                  {"sasl.username", user},
                  {"sasl.password", password}};
  if (!ca.empty()) p.emplace_back("ssl.ca.location", ca);
  return p;
}

/// The configuration with `properties:` under its `kafka:` section (double-quoted values).
std::string with_properties(const WalrelayConfig& cfg, const Properties& props) {
  std::string yaml = cfg.to_yaml();
  const std::string anchor = "  bootstrap_servers: ";
  const auto at = yaml.find(anchor);
  if (at == std::string::npos) throw std::runtime_error("no kafka.bootstrap_servers in\n" + yaml);
  std::string block = "  properties:\n";
  for (const auto& [k, v] : props) {
    std::string q;
    for (char c : v) {
      if (c == '"' || c == '\\') q.push_back('\\');
      q.push_back(c);
    }
    block += "    " + k + ": \"" + q + "\"\n";
  }
  yaml.insert(yaml.find('\n', at) + 1, block);
  return yaml;
}

/// A CA of its own (EC P-256) that signed nothing the broker presents, in a temp dir removed on
/// destruction.
class OtherCa {
 public:
  OtherCa() {
    std::string tmpl = (fs::temp_directory_path() / "walrelay-kafka-ca-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error(std::string("mkdtemp failed: ") + std::strerror(errno));
    }
    dir_ = tmpl;
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
        "-nodes -days 2 -subj '/CN=walrelay test Kafka CA' -keyout '" +
        (dir_ / "ca.key").string() + "' -out '" + cert().string() + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("openssl failed: " + cmd);
  }
  ~OtherCa() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  OtherCa(const OtherCa&) = delete;
  OtherCa& operator=(const OtherCa&) = delete;
  [[nodiscard]] fs::path cert() const { return dir_ / "ca.crt"; }

 private:
  fs::path dir_;
};

class KafkaSecurityTest : public IntegrationTest {
 protected:
  void SetUp() override {
    IntegrationTest::SetUp();
    if (HasFatalFailure()) return;
    std::vector<std::string> missing;
    auto get = [&](const char* name, std::string& out) {
      const char* v = std::getenv(name);
      if (v == nullptr || *v == '\0') {
        missing.emplace_back(name);
      } else {
        out = v;
      }
    };
    get("WALRELAY_TEST_KAFKA_SASL_BOOTSTRAP", sasl_.bootstrap);
    get("WALRELAY_TEST_KAFKA_CA", sasl_.ca);
    get("WALRELAY_TEST_KAFKA_SASL_USER", sasl_.scram_user);
    get("WALRELAY_TEST_KAFKA_SASL_PASSWORD", sasl_.scram_password);
    get("WALRELAY_TEST_KAFKA_PLAIN_USER", sasl_.plain_user);
    get("WALRELAY_TEST_KAFKA_PLAIN_PASSWORD", sasl_.plain_password);
    std::string names;
    for (const auto& m : missing) names += " " + m;
    ASSERT_TRUE(missing.empty())
        << "the Kafka security tests need the SASL_SSL listener of tests/services/start.sh; "
           "missing environment variable(s):"
        << names << " (services started by an older start.sh: stop and start them again)";
    pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  }

  /// A configuration streaming this test's table to the SASL_SSL listener with `props`.
  [[nodiscard]] std::string config(const Properties& props, const std::string& log_level = "info",
                                   const std::string& extra_yaml = "") {
    WalrelayConfig cfg = make_config({{table("t")}});
    cfg.bootstrap = sasl_.bootstrap;
    cfg.log_level = log_level;
    cfg.extra_yaml = extra_yaml;
    return with_properties(cfg, props);
  }

  [[nodiscard]] Properties plain() const {
    return sasl_ssl("PLAIN", sasl_.plain_user, sasl_.plain_password, sasl_.ca);
  }
  [[nodiscard]] Properties scram() const {
    return sasl_ssl("SCRAM-SHA-512", sasl_.scram_user, sasl_.scram_password, sasl_.ca);
  }

  /// Creates this test's slot (wal2json), as an earlier run would have (TearDown drops it).
  void create_slot() {
    pg_->exec("SELECT 1 FROM pg_create_logical_replication_slot(" + sql_literal(name_) +
              ", 'wal2json')");
  }

  /// `walrelay check` for the process's configuration: its exit code.
  static int run_check(WalrelayProcess& proc) {
    proc.start({"check", "--config", proc.config_path().string()});
    return proc.wait_exit(30s);
  }

  /// check passes, run streams three rows, a reader with `reader_props` gets them over the
  /// SASL_SSL listener, run stops with 0; `secret` never appears in what walrelay printed.
  void expect_streams(const Properties& props, const Properties& reader_props,
                      const std::string& secret) {
    WalrelayProcess proc(config(props));
    EXPECT_EQ(run_check(proc), 0) << proc.logs();
    EXPECT_NE(proc.stdout_text().find("1 broker(s) reachable"), std::string::npos)
        << proc.stdout_text();
    EXPECT_NE(proc.stdout_text().find("sasl.password = ****"), std::string::npos)
        << proc.stdout_text();

    ASSERT_NO_THROW(start_streaming(proc, name_));
    pg_->commit({"INSERT INTO " + table("t") + " VALUES (1, 'one'), (2, 'two')",
                 "INSERT INTO " + table("t") + " VALUES (3, 'three')"});
    KafkaReader reader(sasl_.bootstrap, reader_props);
    const auto records = reader.read_at_least({topic("t")}, 3, 20s);
    ASSERT_EQ(records.size(), 3u) << describe(records) << proc.logs();
    std::set<std::string> values;
    for (const auto& r : records) values.insert(json_string_at(r.value.value_or("{}"), "/after/v"));
    EXPECT_EQ(values, (std::set<std::string>{"one", "two", "three"})) << describe(records);
    EXPECT_TRUE(stop_gracefully(proc, name_)) << proc.logs();
    EXPECT_EQ(proc.stdout_text().find(secret), std::string::npos) << proc.logs();
    EXPECT_EQ(proc.stderr_text().find(secret), std::string::npos) << proc.logs();
  }

  /// check and run both exit 7 with `expected` (and check with "(run exits 7)") in what they
  /// print, never `secret`; nothing reaches the topic.
  void expect_exit_7(const Properties& props, const std::string& expected,
                     const std::string& secret, const std::string& extra_yaml = "") {
    // debug: librdkafka's own lines too, the most a user could turn on.
    WalrelayProcess proc(config(props, "debug", extra_yaml));
    EXPECT_EQ(run_check(proc), 7) << proc.logs();
    const std::string check_out = proc.stdout_text();
    EXPECT_NE(check_out.find(expected), std::string::npos) << check_out;
    EXPECT_NE(check_out.find("(run exits 7)"), std::string::npos) << check_out;

    const std::size_t err_before = proc.stderr_text().size();
    proc.start();
    EXPECT_EQ(proc.wait_exit(30s), 7) << proc.logs();
    EXPECT_NE(proc.stderr_text().substr(err_before).find(expected), std::string::npos)
        << proc.logs();
    EXPECT_NE(proc.stderr_text().find("Retrying cannot fix this"), std::string::npos)
        << proc.logs();
    if (!secret.empty()) {
      EXPECT_EQ(proc.stdout_text().find(secret), std::string::npos) << proc.logs();
      EXPECT_EQ(proc.stderr_text().find(secret), std::string::npos) << proc.logs();
    }
    EXPECT_TRUE(kafka_->read_all({topic("t")}, 10s).empty());
  }

  SaslEnv sasl_;
};

// 1. PLAIN over TLS, as a managed Kafka's "API key and secret" are given.
TEST_F(KafkaSecurityTest, PlainOverTlsStreamsAndReadsBack) {
  expect_streams(plain(), plain(), sasl_.plain_password);
}

// 2. SCRAM-SHA-512 over TLS. The reader uses PLAIN: its librdkafka is walrelay's.
TEST_F(KafkaSecurityTest, ScramSha512OverTlsStreamsOrNamesTheLibrdkafkaLimit) {
  if (rd_kafka_version() >= kScramFixedVersion) {
    expect_streams(scram(), plain(), sasl_.scram_password);
    return;
  }
  // Kafka 4.x (the test broker) checks the SCRAM nonce strictly (RFC 5802 section 7), which
  // librdkafka before 2.6.1 fails: the right password is refused, and walrelay says why.
  std::cout << "[kafka-security] librdkafka " << rd_kafka_version_str()
            << " < 2.6.1: SCRAM against Kafka 4.x is expected to be refused\n";
  expect_exit_7(scram(), "fixed in librdkafka 2.6.1", sasl_.scram_password);
}

// 3. A wrong password, PLAIN and SCRAM: exit 7, the password never printed.
TEST_F(KafkaSecurityTest, WrongPasswordExits7WithoutPrintingIt) {
  const std::string wrong = "Wrong-S3cret-Value";
  {
    SCOPED_TRACE("PLAIN");
    expect_exit_7(sasl_ssl("PLAIN", sasl_.plain_user, wrong, sasl_.ca),
                  "Kafka refused walrelay's credentials", wrong);
  }
  {
    SCOPED_TRACE("SCRAM-SHA-512");
    expect_exit_7(sasl_ssl("SCRAM-SHA-512", sasl_.scram_user, wrong, sasl_.ca),
                  "Kafka refused walrelay's credentials", wrong);
  }
  {
    // With the slot there, run streams before it publishes: the producer's error, not the probe
    // before slot creation, stops it (a restart after the password changed).
    SCOPED_TRACE("PLAIN, slot exists");
    create_slot();
    expect_exit_7(sasl_ssl("PLAIN", sasl_.plain_user, wrong, sasl_.ca),
                  "Kafka refused walrelay's credentials", wrong);
  }
  {
    // exactly_once: the failure comes while init_transactions waits; it ends the session's start
    // at once instead of after init_transactions' 30 s.
    SCOPED_TRACE("PLAIN, slot exists, delivery exactly_once");
    expect_exit_7(sasl_ssl("PLAIN", sasl_.plain_user, wrong, sasl_.ca),
                  "Kafka refused walrelay's credentials", wrong, "delivery: exactly_once\n");
  }
}

// 4. The broker's certificate does not verify: with the system's CAs (no ssl.ca.location) and
//    with a CA that signed something else. A configuration error, exit 7 like refused credentials
//    (docs/operations.md "Exit codes").
TEST_F(KafkaSecurityTest, UnverifiableBrokerCertificateExits7) {
  {
    SCOPED_TRACE("no ssl.ca.location");
    expect_exit_7(sasl_ssl("PLAIN", sasl_.plain_user, sasl_.plain_password, ""),
                  "the TLS handshake with Kafka failed", sasl_.plain_password);
  }
  const OtherCa other;
  {
    SCOPED_TRACE("another CA");
    expect_exit_7(sasl_ssl("PLAIN", sasl_.plain_user, sasl_.plain_password, other.cert().string()),
                  "the TLS handshake with Kafka failed", sasl_.plain_password);
  }
  {
    SCOPED_TRACE("another CA, slot exists");
    create_slot();
    expect_exit_7(sasl_ssl("PLAIN", sasl_.plain_user, sasl_.plain_password, other.cert().string()),
                  "the TLS handshake with Kafka failed", sasl_.plain_password);
  }
}

}  // namespace
}  // namespace walrelay::itest
