// Security properties of walrelay (docs/operations.md "Security"), checked against the real
// PostgreSQL (wal2json) and Kafka of tests/services/start.sh:
//   1. TLS to PostgreSQL: with `sslmode=verify-full` and the CA that signed the server certificate
//      walrelay streams over TLS (pg_stat_ssl); with another CA it never connects (certificate
//      verification error in its log, no slot).
//   2. Secrets (conninfo/URI passwords, secret librdkafka properties) never reach stdout, stderr
//      or logs of `walrelay check` and `walrelay run`, including failing runs; `check` prints
//      `****` in their place.
//   3. walrelay listens on no socket.
//
// The TLS test turns `ssl` on in the shared test server (ALTER SYSTEM + pg_reload_conf) and resets
// it at the end whatever happens, so every test here runs alone (RUN_SERIAL).

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {
namespace {

namespace fs = std::filesystem;

// ------------------------------------------------------------------------------ helpers

struct ShellResult {
  int status = -1;     ///< exit status of the shell, 128+ when killed
  std::string output;  ///< stdout and stderr together
};

/// Runs `command` with /bin/sh, stdout and stderr captured together.
ShellResult shell(const std::string& command) {
  ShellResult r;
  FILE* p = ::popen(("(" + command + ") 2>&1").c_str(), "r");
  if (p == nullptr) {
    r.output = std::string("popen failed: ") + std::strerror(errno);
    return r;
  }
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int rc = ::pclose(p);
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
  return r;
}

/// `'text'` for /bin/sh.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

/// host, port and dbname of a libpq conninfo string (the test services' one).
struct ConnParts {
  std::string host;
  std::string port;
  std::string dbname;
  std::string user;
};

ConnParts conn_parts(const std::string& conninfo) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err != nullptr ? err : "invalid conninfo";
    if (err != nullptr) PQfreemem(err);
    throw std::runtime_error("cannot parse " + conninfo + ": " + msg);
  }
  ConnParts parts;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const std::string k = o->keyword;
    if (k == "host" || k == "hostaddr") parts.host = o->val;
    if (k == "port") parts.port = o->val;
    if (k == "dbname") parts.dbname = o->val;
    if (k == "user") parts.user = o->val;
  }
  PQconninfoFree(opts);
  return parts;
}

/// A loopback TCP port nobody listens on (bound to port 0, then closed).
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// A fresh private directory under the temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::string tmpl = (fs::temp_directory_path() / ("walrelay-sec-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// Inserts `properties:` under the `kafka:` section of a generated configuration.
std::string with_kafka_properties(std::string yaml,
                                  const std::vector<std::pair<std::string, std::string>>& props) {
  const std::string anchor = "  bootstrap_servers: ";
  const auto at = yaml.find(anchor);
  if (at == std::string::npos) throw std::runtime_error("no kafka.bootstrap_servers in\n" + yaml);
  const auto eol = yaml.find('\n', at);
  std::string block = "  properties:\n";
  for (const auto& [k, v] : props) {
    std::string q = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') q.push_back('\\');
      if (c == '\n') {
        q += "\\n";
        continue;
      }
      q.push_back(c);
    }
    block += "    " + k + ": " + q + "\"\n";
  }
  yaml.insert(eol + 1, block);
  return yaml;
}

/// Records a failure for every secret that occurs in `text`, with the line it occurs on.
void expect_no_secrets(const std::string& text, const std::vector<std::string>& secrets,
                       const std::string& where) {
  for (const auto& secret : secrets) {
    const auto pos = text.find(secret);
    if (pos == std::string::npos) continue;
    const auto line_start = text.rfind('\n', pos);
    const auto line_end = text.find('\n', pos);
    const std::string line =
        text.substr(line_start == std::string::npos ? 0 : line_start + 1,
                    (line_end == std::string::npos ? text.size() : line_end) -
                        (line_start == std::string::npos ? 0 : line_start + 1));
    ADD_FAILURE() << where << " contains the secret \"" << secret << "\" on this line:\n  " << line;
  }
}

/// Runs `walrelay check --config` for the process's configuration and returns its exit code.
int run_check(WalrelayProcess& proc, std::chrono::milliseconds timeout = 60s) {
  proc.start({"check", "--config", proc.config_path().string()});
  return proc.wait_exit(timeout);
}

/// Pid of the running walrelay child of this process whose command line names `config_path`
/// (WalrelayProcess does not expose its pid); nullopt when there is none.
std::optional<pid_t> walrelay_pid(const fs::path& config_path) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat_in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(stat_in)), std::istreambuf_iterator<char>());
    const auto rparen = stat.rfind(')');
    if (rparen == std::string::npos) continue;
    std::istringstream rest(stat.substr(rparen + 1));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid != ::getpid() || state == "Z") continue;
    std::ifstream cmd_in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(cmd_in)), std::istreambuf_iterator<char>());
    if (cmdline.find(config_path.string()) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return std::nullopt;
}

/// Inodes of the sockets open in process `pid` (`socket:[N]` links under /proc/<pid>/fd; the
/// threads share the descriptor table).
std::set<unsigned long> socket_inodes(pid_t pid) {
  std::set<unsigned long> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code lec;
    const std::string target = fs::read_symlink(entry.path(), lec).string();
    if (lec || !target.starts_with("socket:[")) continue;
    out.insert(std::stoul(target.substr(8, target.size() - 9)));
  }
  return out;
}

/// One row of /proc/<pid>/net/{tcp,tcp6,udp,udp6,unix}.
struct SocketRow {
  std::string table;  ///< tcp, tcp6, udp, udp6, unix
  std::string local;  ///< hex address:port (inet) or path (unix)
  unsigned state = 0;
  unsigned long flags = 0;  ///< unix only
  unsigned long inode = 0;
  std::string line;
};

std::vector<SocketRow> socket_table(pid_t pid, const std::string& table) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/net/" + table);
  std::vector<SocketRow> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string w; f >> w;) fields.push_back(w);
    SocketRow r;
    r.table = table;
    r.line = line;
    if (table == "unix") {
      // Num RefCount Protocol Flags Type St Inode [Path]
      if (fields.size() < 7) continue;
      r.flags = std::stoul(fields[3], nullptr, 16);
      r.state = static_cast<unsigned>(std::stoul(fields[5], nullptr, 16));
      r.inode = std::stoul(fields[6]);
      if (fields.size() > 7) r.local = fields[7];
    } else {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (fields.size() < 10) continue;
      r.local = fields[1];
      r.state = static_cast<unsigned>(std::stoul(fields[3], nullptr, 16));
      r.inode = std::stoul(fields[9]);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

constexpr unsigned kTcpEstablished = 0x01;
constexpr unsigned kTcpListen = 0x0A;
constexpr unsigned kUdpUnconnected = 0x07;  // TCP_CLOSE: a bound, unconnected (receiving) socket
constexpr unsigned long kUnixAcceptCon = 0x10000;  // __SO_ACCEPTCON: a listening unix socket

// --------------------------------------------------------------------------- TLS helpers

/// A throwaway PKI: a CA, a server certificate for CN=localhost (SAN DNS:localhost,
/// IP:127.0.0.1) signed by it, and a second CA with the same subject name but its own key (it did
/// not sign anything the server presents).
struct Pki {
  fs::path ca_cert;
  fs::path other_ca_cert;
  fs::path server_cert;
  fs::path server_key;
};

Pki make_pki(const fs::path& dir) {
  const std::string d = shell_quote(dir.string());
  const std::string subject_ca = "'/CN=walrelay security test CA'";
  const std::string script =
      "set -e; cd " + d +
      "; openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout ca.key -out ca.crt -subj " +
      subject_ca +
      " -addext 'basicConstraints=critical,CA:TRUE'"
      " -addext 'keyUsage=critical,keyCertSign,cRLSign'"
      "; openssl req -x509 -newkey rsa:2048 -nodes -days 2 -keyout other-ca.key -out other-ca.crt"
      " -subj " +
      subject_ca +
      " -addext 'basicConstraints=critical,CA:TRUE'"
      " -addext 'keyUsage=critical,keyCertSign,cRLSign'"
      "; openssl req -new -newkey rsa:2048 -nodes -keyout server.key -out server.csr"
      " -subj '/CN=localhost'"
      "; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=critical,CA:FALSE\\n"
      "keyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=serverAuth\\n'"
      " > server.ext"
      "; openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 0x$(openssl rand "
      "-hex 8) -days 2 -extfile server.ext -out server.crt"
      "; openssl verify -CAfile ca.crt server.crt"
      "; ! openssl verify -CAfile other-ca.crt server.crt";
  const ShellResult r = shell(script);
  if (r.status != 0) throw std::runtime_error("openssl failed:\n" + r.output);
  return Pki{dir / "ca.crt", dir / "other-ca.crt", dir / "server.crt", dir / "server.key"};
}

/// True when a new connection with `conninfo` succeeds (PQping does not do the TLS handshake in
/// every case, so this really connects).
bool can_connect(const std::string& conninfo, std::string* error = nullptr) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  const bool ok = c != nullptr && PQstatus(c) == CONNECTION_OK;
  if (!ok && error != nullptr) *error = c != nullptr ? PQerrorMessage(c) : "out of memory";
  PQfinish(c);
  return ok;
}

/// `ssl = on` with the given files on the shared test server for the lifetime of the object:
/// the destructor resets the four settings and reloads (also when the test failed), then waits
/// until new connections see `ssl = off`.
class ServerTls {
 public:
  explicit ServerTls(std::string admin_conninfo) : admin_(std::move(admin_conninfo)) {}
  ~ServerTls() {
    if (!touched_) return;
    try {
      Pg pg(admin_ + " sslmode=disable");
      for (const char* s : {"ssl", "ssl_cert_file", "ssl_key_file", "ssl_ca_file"}) {
        pg.exec(std::string("ALTER SYSTEM RESET ") + s);
      }
      pg.exec("SELECT pg_reload_conf()");
      const bool off = wait_until(
          [&] {
            try {
              return Pg(admin_ + " sslmode=disable").value("SHOW ssl") == "off";
            } catch (const std::exception&) {
              return false;
            }
          },
          30s, 100ms);
      if (!off) std::cerr << "[security] ssl still on after ALTER SYSTEM RESET + reload\n";
    } catch (const std::exception& e) {
      ADD_FAILURE() << "could not reset the server's ssl settings: " << e.what();
    }
  }
  ServerTls(const ServerTls&) = delete;
  ServerTls& operator=(const ServerTls&) = delete;

  /// Turns TLS on and waits until a new `sslmode=require` connection succeeds.
  void enable(const Pki& pki) {
    Pg pg(admin_ + " sslmode=disable");
    touched_ = true;
    // ALTER SYSTEM cannot run in a transaction block: one statement per call.
    pg.exec("ALTER SYSTEM SET ssl_cert_file = " + sql_literal(pki.server_cert.string()));
    pg.exec("ALTER SYSTEM SET ssl_key_file = " + sql_literal(pki.server_key.string()));
    pg.exec("ALTER SYSTEM SET ssl_ca_file = " + sql_literal(pki.ca_cert.string()));
    pg.exec("ALTER SYSTEM SET ssl = on");
    pg.exec("SELECT pg_reload_conf()");
    std::string error;
    const bool on =
        wait_until([&] { return can_connect(admin_ + " sslmode=require", &error); }, 30s, 100ms);
    if (!on) {
      throw std::runtime_error(
          "the server did not accept TLS connections after ALTER SYSTEM SET ssl = on and a reload "
          "(see the PostgreSQL log for the reason): " +
          error);
    }
  }

 private:
  std::string admin_;
  bool touched_ = false;
};

// ------------------------------------------------------------------------------ fixture

class SecurityTest : public IntegrationTest {
 protected:
  /// The services' PostgreSQL as host/port/dbname.
  [[nodiscard]] ConnParts pg_parts() const { return conn_parts(env_.pg_conninfo); }

  /// Every walrelay session of connector `name_` currently in pg_stat_activity, with its
  /// application_name and pg_stat_ssl.ssl.
  std::vector<Pg::Row> walrelay_sessions() {
    return pg_->query(
        "SELECT a.application_name, s.ssl::text FROM pg_stat_activity a JOIN pg_stat_ssl s "
        "USING (pid) WHERE a.application_name LIKE 'walrelay-%' AND right(a.application_name, " +
        std::to_string(name_.size()) + ") = " + sql_literal(name_));
  }
};

// 1. TLS to PostgreSQL: verify-full with the signing CA streams over TLS; another CA never
//    connects.
TEST_F(SecurityTest, VerifyFullTlsStreamsWithTheSigningCaAndRefusesAnotherCa) {
  TempDir certs("tls");
  const Pki pki = make_pki(certs.path());

  // The server runs as the owner of its data directory (the `postgres` OS user when the services
  // were started as root): it needs to reach the directory and own its key file, mode 0600.
  const std::string data_dir = pg_->value("SHOW data_directory");
  struct stat data_st {};
  ASSERT_EQ(::stat(data_dir.c_str(), &data_st), 0) << data_dir << ": " << std::strerror(errno);
  ASSERT_EQ(::chmod(certs.path().c_str(), 0755), 0) << std::strerror(errno);
  ASSERT_EQ(::chmod(pki.server_key.c_str(), 0600), 0) << std::strerror(errno);
  for (const auto& f : {pki.server_key, pki.server_cert, pki.ca_cert}) {
    if (::getuid() != data_st.st_uid) {
      ASSERT_EQ(::chown(f.c_str(), data_st.st_uid, data_st.st_gid), 0)
          << "chown " << f << ": " << std::strerror(errno);
    }
  }

  ServerTls tls(env_.pg_admin_conninfo);
  ASSERT_NO_THROW(tls.enable(pki));

  const ConnParts parts = pg_parts();
  const std::string tls_conninfo_base = "host=localhost port=" + parts.port +
                                        " dbname=" + parts.dbname +
                                        " user=walrelay sslmode=verify-full sslrootcert=";
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");

  // (a) Another CA (same subject name, other key): the certificate does not verify, walrelay
  //     retries without ever opening a replication session.
  {
    WalrelayConfig cfg = make_config({{table("t")}});
    cfg.conninfo = tls_conninfo_base + pki.other_ca_cert.string();
    WalrelayProcess proc(cfg.to_yaml(), "walrelay (other CA)");
    proc.start();
    EXPECT_TRUE(proc.wait_for_log("certificate verify failed", 20s))
        << "no certificate verification error logged\n"
        << proc.logs();
    EXPECT_TRUE(proc.wait_for_log("reconnecting", 20s))
        << "walrelay did not retry after the verification error\n"
        << proc.logs();
    // A few seconds of retries: still nothing reaches the server.
    const bool streamed = wait_until(
        [&] { return slot_state(*pg_, name_).has_value() || !walrelay_sessions().empty(); }, 3s,
        100ms);
    EXPECT_FALSE(streamed) << "walrelay reached PostgreSQL although the server certificate was "
                              "not signed by its sslrootcert\n"
                           << proc.logs();
    EXPECT_TRUE(proc.running()) << "walrelay exited instead of retrying\n" << proc.logs();
    proc.stop(SIGTERM, 30s);
    EXPECT_FALSE(slot_state(*pg_, name_).has_value()) << "slot " << name_ << " was created";
  }

  // (b) The signing CA: streams, and its walsender (and every other session) uses TLS.
  {
    WalrelayConfig cfg = make_config({{table("t")}});
    cfg.conninfo = tls_conninfo_base + pki.ca_cert.string();
    WalrelayProcess proc(cfg.to_yaml(), "walrelay (signing CA)");
    ASSERT_NO_THROW(start_streaming(proc, name_));
    pg_->commit({"INSERT INTO " + table("t") + " VALUES (1, 'over tls'), (2, 'still tls')"});
    const auto records = kafka_->read_at_least({topic("t")}, 2);
    ASSERT_EQ(records.size(), 2u) << describe(records) << proc.logs();
    std::set<std::string> values;
    for (const auto& r : records) values.insert(json_string_at(r.value.value_or("{}"), "/after/v"));
    EXPECT_EQ(values, (std::set<std::string>{"over tls", "still tls"})) << describe(records);

    const auto rows = pg_->query(
        "SELECT ssl::text FROM pg_stat_ssl JOIN pg_stat_replication USING (pid) "
        "WHERE application_name = " +
        sql_literal("walrelay-" + name_));
    ASSERT_EQ(rows.size(), 1u) << "walsender of walrelay-" << name_ << " not found";
    EXPECT_EQ(rows[0][0].value_or("NULL"), "true") << "walrelay's walsender is not using TLS";
    const auto sessions = walrelay_sessions();
    EXPECT_FALSE(sessions.empty());
    for (const auto& s : sessions) {
      EXPECT_EQ(s[1].value_or("NULL"), "true")
          << "session " << s[0].value_or("?") << " is not using TLS";
    }
    EXPECT_TRUE(stop_gracefully(proc, name_)) << proc.logs();
  }
}

// ---------------------------------------------------------------------------- secrets

const std::string kPgSecret = "Pg-S3cret-Value";
const std::string kUriSecret = "Uri-S3cret-Value";
const std::string kKafkaSecret = "Kafka-S3cret-Value";
const std::string kKeySecret = "Key-S3cret-Value";
const std::vector<std::string> kAllSecrets = {kPgSecret, kUriSecret, kKafkaSecret, kKeySecret};

/// Secret librdkafka properties the PLAINTEXT test broker tolerates (librdkafka 2.0.2 accepts
/// sasl.password and ssl.key.password with security.protocol=plaintext and ignores them);
/// `debug: conf` makes librdkafka log its whole configuration (it redacts these itself).
const std::vector<std::pair<std::string, std::string>> kSecretProperties = {
    {"sasl.password", kKafkaSecret},
    {"ssl.key.password", kKeySecret},
    {"debug", "conf"},
};

/// The check output must show each configured secret property as `name = ****`.
void expect_masked_properties(const std::string& out) {
  EXPECT_NE(out.find("sasl.password = ****"), std::string::npos) << out;
  EXPECT_NE(out.find("ssl.key.password = ****"), std::string::npos) << out;
}

// 2a. Keyword conninfo with a password + secret Kafka properties: check and a streaming run at
//     debug level (librdkafka's configuration dump included) print none of them.
TEST_F(SecurityTest, KeywordConninfoPasswordAndKafkaSecretsNeverReachCheckOrRunOutput) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  const ConnParts parts = pg_parts();
  WalrelayConfig cfg = make_config({{table("t")}});
  cfg.conninfo = "host=127.0.0.1 port=" + parts.port + " dbname=" + parts.dbname +
                 " user=walrelay password=" + kPgSecret;
  cfg.log_level = "debug";
  WalrelayProcess proc(with_kafka_properties(cfg.to_yaml(), kSecretProperties), "walrelay");

  EXPECT_EQ(run_check(proc), 0) << proc.logs();
  const std::string check_out = proc.stdout_text();
  EXPECT_NE(check_out.find("postgres: host=127.0.0.1 port=" + parts.port +
                           " dbname=" + parts.dbname + " user=walrelay password=****"),
            std::string::npos)
      << check_out;
  expect_masked_properties(check_out);
  expect_no_secrets(proc.stdout_text(), kAllSecrets, "walrelay check stdout");
  expect_no_secrets(proc.stderr_text(), kAllSecrets, "walrelay check stderr");

  const std::size_t run_out = proc.stdout_text().size();
  const std::size_t run_err = proc.stderr_text().size();
  ASSERT_NO_THROW(start_streaming(proc, name_));
  pg_->commit({"INSERT INTO " + table("t") + " VALUES (1, 'x')"});
  const auto records = kafka_->read_at_least({topic("t")}, 1);
  EXPECT_EQ(records.size(), 1u) << describe(records) << proc.logs();
  EXPECT_TRUE(stop_gracefully(proc, name_)) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("[redacted]"), std::string::npos)
      << "expected librdkafka's configuration dump (debug: conf) in the debug log, with the "
         "secret properties redacted\n"
      << proc.logs();
  expect_no_secrets(proc.stdout_text().substr(run_out), kAllSecrets, "walrelay run stdout");
  expect_no_secrets(proc.stderr_text().substr(run_err), kAllSecrets, "walrelay run stderr");
}

// 2b. URI conninfo with a password: masked in check, absent from a streaming run's logs.
TEST_F(SecurityTest, UriPasswordNeverReachesCheckOrRunOutput) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  const ConnParts parts = pg_parts();
  WalrelayConfig cfg = make_config({{table("t")}});
  cfg.conninfo = "postgresql://walrelay:" + kUriSecret + "@127.0.0.1:" + parts.port + "/" +
                 parts.dbname + "?connect_timeout=10";
  cfg.log_level = "debug";
  WalrelayProcess proc(with_kafka_properties(cfg.to_yaml(), kSecretProperties), "walrelay");

  EXPECT_EQ(run_check(proc), 0) << proc.logs();
  const std::string check_out = proc.stdout_text();
  EXPECT_NE(check_out.find("postgres: postgresql://walrelay:****@127.0.0.1:" + parts.port + "/" +
                           parts.dbname),
            std::string::npos)
      << check_out;
  expect_masked_properties(check_out);
  expect_no_secrets(proc.stdout_text(), kAllSecrets, "walrelay check stdout");
  expect_no_secrets(proc.stderr_text(), kAllSecrets, "walrelay check stderr");

  const std::size_t run_out = proc.stdout_text().size();
  const std::size_t run_err = proc.stderr_text().size();
  ASSERT_NO_THROW(start_streaming(proc, name_));
  pg_->commit({"INSERT INTO " + table("t") + " VALUES (1, 'x')"});
  const auto records = kafka_->read_at_least({topic("t")}, 1);
  EXPECT_EQ(records.size(), 1u) << describe(records) << proc.logs();
  EXPECT_TRUE(stop_gracefully(proc, name_)) << proc.logs();
  expect_no_secrets(proc.stdout_text().substr(run_out), kAllSecrets, "walrelay run stdout");
  expect_no_secrets(proc.stderr_text().substr(run_err), kAllSecrets, "walrelay run stderr");
}

// 2c. PostgreSQL unreachable (nobody listens on the port): check fails and the run keeps
//     retrying; the connection errors they print quote no password.
TEST_F(SecurityTest, ConnectionErrorsNeverQuoteThePassword) {
  const ConnParts parts = pg_parts();
  const std::string port = std::to_string(closed_port());
  const std::vector<std::pair<std::string, std::string>> variants = {
      {"keyword", "host=127.0.0.1 port=" + port + " dbname=" + parts.dbname +
                      " user=walrelay password=" + kPgSecret + " connect_timeout=5"},
      {"uri", "postgresql://walrelay:" + kUriSecret + "@127.0.0.1:" + port + "/" + parts.dbname +
                  "?connect_timeout=5"},
  };
  for (const auto& [label, conninfo] : variants) {
    SCOPED_TRACE(label);
    WalrelayConfig cfg = make_config({{table("t")}});
    cfg.conninfo = conninfo;
    cfg.log_level = "debug";
    WalrelayProcess proc(with_kafka_properties(cfg.to_yaml(), kSecretProperties),
                         "walrelay (" + label + ", unreachable)");

    EXPECT_EQ(run_check(proc), 1) << proc.logs();
    const std::string check_out = proc.stdout_text();
    EXPECT_NE(check_out.find("FAIL"), std::string::npos) << check_out;
    EXPECT_NE(check_out.find("****"), std::string::npos) << check_out;
    expect_masked_properties(check_out);
    expect_no_secrets(proc.stdout_text(), kAllSecrets, "walrelay check stdout (" + label + ")");
    expect_no_secrets(proc.stderr_text(), kAllSecrets, "walrelay check stderr (" + label + ")");

    const std::size_t run_out = proc.stdout_text().size();
    const std::size_t run_err = proc.stderr_text().size();
    proc.start();
    EXPECT_TRUE(proc.wait_for_log("reconnecting", 20s)) << "no connection error / retry logged\n"
                                                        << proc.logs();
    // Let a second attempt fail too.
    wait_until([&] { return !proc.running(); }, 2s);
    EXPECT_TRUE(proc.running()) << "walrelay exited instead of retrying\n" << proc.logs();
    proc.stop(SIGTERM, 30s);
    expect_no_secrets(proc.stdout_text().substr(run_out), kAllSecrets,
                      "walrelay run stdout (" + label + ")");
    expect_no_secrets(proc.stderr_text().substr(run_err), kAllSecrets,
                      "walrelay run stderr (" + label + ")");
  }
}

/// One configuration of the Kafka-property tests: its properties, the secrets among their values
/// and the `name = ****` line check must print.
struct KafkaVariant {
  std::string label;
  std::vector<std::pair<std::string, std::string>> props;
  std::vector<std::string> secrets;
  std::string masked;
};

/// For each variant: `walrelay check` prints the masked line and no secret; `walrelay run` (which
/// exits at once with code 2 when librdkafka refuses the configuration, else runs for a few
/// seconds) prints no secret either. `expect_refused`: the producer must be refused.
void check_kafka_variants(const std::vector<KafkaVariant>& variants, const WalrelayConfig& base,
                          bool expect_refused) {
  for (const auto& v : variants) {
    SCOPED_TRACE(v.label);
    std::vector<std::string> secrets = v.secrets;
    secrets.push_back(kPgSecret);
    WalrelayConfig cfg = base;
    cfg.conninfo += " password=" + kPgSecret;
    cfg.log_level = "debug";
    WalrelayProcess proc(with_kafka_properties(cfg.to_yaml(), v.props),
                         "walrelay (" + v.label + ")");

    const int check_rc = run_check(proc);
    const std::string check_out = proc.stdout_text();
    EXPECT_NE(check_out.find(v.masked), std::string::npos) << check_out;
    if (expect_refused) {
      EXPECT_EQ(check_rc, 2) << check_out;  // as `run`: a configuration librdkafka refuses
      EXPECT_NE(check_out.find("FAIL"), std::string::npos) << check_out;
    }
    expect_no_secrets(proc.stdout_text(), secrets, "walrelay check stdout (" + v.label + ")");
    expect_no_secrets(proc.stderr_text(), secrets, "walrelay check stderr (" + v.label + ")");

    const std::size_t run_out = proc.stdout_text().size();
    const std::size_t run_err = proc.stderr_text().size();
    proc.start();
    if (expect_refused) {
      // The producer cannot be created: a configuration error, at once.
      EXPECT_EQ(proc.wait_exit(30s), 2) << proc.logs();
    } else {
      wait_until([&] { return !proc.running(); }, 5s);
      proc.stop(SIGTERM, 30s);
    }
    expect_no_secrets(proc.stdout_text().substr(run_out), secrets,
                      "walrelay run stdout (" + v.label + ")");
    expect_no_secrets(proc.stderr_text().substr(run_err), secrets,
                      "walrelay run stderr (" + v.label + ")");
  }
}

// 2d. Secret-valued librdkafka properties librdkafka refuses, either in rd_kafka_conf_set (a
//     property this build does not support) or in rd_kafka_new (an unparsable ssl.key.pem; a SASL
//     mechanism it does not know, which rd_kafka_new's error message quotes): check and run
//     report the failure, never the value.
TEST_F(SecurityTest, RefusedKafkaPropertiesNeverQuoteTheirValues) {
  const std::string kOauthSecret = "Oauth-S3cret-Value";
  const std::string kPemSecret = "Pem-S3cret-Value";
  const std::string kMechSecret = "Mech-S3cret-Value";
  const std::vector<KafkaVariant> variants = {
      // Debian's librdkafka 2.0.2 is built without OIDC: rd_kafka_conf_set refuses the property.
      {"sasl.oauthbearer.client.secret unsupported",
       {{"sasl.oauthbearer.client.secret", kOauthSecret}, {"sasl.password", kKafkaSecret}},
       {kOauthSecret, kKafkaSecret},
       "sasl.oauthbearer.client.secret = ****"},
      {"unparsable ssl.key.pem",
       {{"security.protocol", "ssl"},
        {"ssl.key.pem",
         "-----BEGIN PRIVATE KEY-----\n" + kPemSecret + "\n-----END PRIVATE KEY-----\n"},
        {"ssl.key.password", kKeySecret}},
       {kPemSecret, kKeySecret},
       "ssl.key.pem = ****"},
      // rd_kafka_new: "Unsupported SASL mechanism: <value>".
      {"unsupported sasl.mechanisms",
       {{"security.protocol", "sasl_plaintext"},
        {"sasl.mechanisms", kMechSecret},
        {"sasl.username", "walrelay"},
        {"sasl.password", kKafkaSecret}},
       {kMechSecret, kKafkaSecret},
       "sasl.mechanisms = ****"},
  };
  WalrelayConfig base = make_config({{table("t")}});
  base.conninfo = env_.pg_conninfo;
  check_kafka_variants(variants, base, /*expect_refused=*/true);
}

// 2e. Secret-valued librdkafka properties librdkafka accepts but comments on in its own log
//     lines: a `sasl.mechanisms` value it does not know while security.protocol is plaintext
//     (CONFWARN quotes it), and an OAUTHBEARER `sasl.oauthbearer.config` it cannot parse (the
//     unsecured-JWT token refresh fails on it). Both `sasl.*`: README says their values never
//     appear in logs.
TEST_F(SecurityTest, KafkaLogLinesNeverQuoteSaslValues) {
  const std::string kMechSecret = "Mech-S3cret-Value";
  const std::string kCfgSecret = "Cfg-S3cret-Value";
  const std::vector<KafkaVariant> variants = {
      {"unknown sasl.mechanisms on plaintext",
       {{"sasl.mechanisms", kMechSecret}, {"sasl.password", kKafkaSecret}},
       {kMechSecret, kKafkaSecret},
       "sasl.mechanisms = ****"},
      {"unparsable sasl.oauthbearer.config",
       {{"security.protocol", "sasl_plaintext"},
        {"sasl.mechanisms", "OAUTHBEARER"},
        {"sasl.oauthbearer.config", "principal=walrelay bogus=" + kCfgSecret}},
       {kCfgSecret},
       "sasl.oauthbearer.config = ****"},
  };
  WalrelayConfig base = make_config({{table("t")}});
  base.conninfo = env_.pg_conninfo;
  check_kafka_variants(variants, base, /*expect_refused=*/false);
}

// Kafka refusing walrelay's credentials (here: SASL against a broker that has none) is not
// retried for ever: exit 7 with a message that says what to fix, secrets redacted.
TEST_F(SecurityTest, KafkaAuthenticationFailureStopsWithExit7) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY)");
  auto cfg = make_config({{table("t")}});
  cfg.extra_yaml = "kafka:\n  bootstrap_servers: " + env_.kafka_bootstrap +
                   "\n  properties: {security.protocol: SASL_PLAINTEXT, sasl.mechanism: PLAIN, "
                   "sasl.username: walrelay-user, sasl.password: Sasl-S3cret-Value}\n";
  std::string yaml = cfg.to_yaml();
  // The harness wrote its own kafka section first: keep only the test's.
  const auto first = yaml.find("kafka:\n");
  const auto next = yaml.find("\ntopics:", first);
  yaml.erase(first, next + 1 - first);
  WalrelayProcess proc(yaml);
  proc.start();
  EXPECT_EQ(proc.wait_exit(60s), 7) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("Kafka refused walrelay's credentials"), std::string::npos)
      << proc.logs();
  EXPECT_EQ(proc.stderr_text().find("Sasl-S3cret-Value"), std::string::npos) << proc.logs();
}

// 2f. A URI whose password holds an unencoded `%` is malformed for libpq, whose parse error
//     quotes the whole token ("invalid percent-encoded token: \"...\""): walrelay must not pass
//     that quote on.
TEST_F(SecurityTest, MalformedUriErrorNeverQuotesThePassword) {
  const std::string secret = "Uri-S3cret%zz-Value";
  const ConnParts parts = pg_parts();
  WalrelayConfig cfg = make_config({{table("t")}});
  cfg.conninfo =
      "postgresql://walrelay:" + secret + "@127.0.0.1:" + parts.port + "/" + parts.dbname;
  WalrelayProcess proc(cfg.to_yaml(), "walrelay (malformed URI)");

  EXPECT_EQ(run_check(proc), 1) << proc.logs();
  EXPECT_NE(proc.stdout_text().find("FAIL"), std::string::npos) << proc.stdout_text();
  expect_no_secrets(proc.stdout_text(), {"S3cret"}, "walrelay check stdout");
  expect_no_secrets(proc.stderr_text(), {"S3cret"}, "walrelay check stderr");

  const std::size_t run_out = proc.stdout_text().size();
  const std::size_t run_err = proc.stderr_text().size();
  proc.start();
  // An invalid conninfo cannot be fixed by retrying: walrelay stops.
  EXPECT_NE(proc.wait_exit(30s), WalrelayProcess::kTimedOut) << proc.logs();
  EXPECT_NE(proc.stderr_text().find("source.conninfo"), std::string::npos) << proc.logs();
  expect_no_secrets(proc.stdout_text().substr(run_out), {"S3cret"}, "walrelay run stdout");
  expect_no_secrets(proc.stderr_text().substr(run_err), {"S3cret"}, "walrelay run stderr");
}

// 2g. An unquoted password with a space (`password=Pg-S3cret Tail-S3cret-Part`): libpq takes
//     `Pg-S3cret` as the password and rejects the rest (`missing "=" after "Tail-S3cret-Part"`);
//     neither part of what the operator meant as the password may be printed.
TEST_F(SecurityTest, UnquotedPasswordWithSpaceIsNeverPrinted) {
  const std::vector<std::string> secrets = {"Pg-S3cret", "Tail-S3cret-Part"};
  const ConnParts parts = pg_parts();
  WalrelayConfig cfg = make_config({{table("t")}});
  cfg.conninfo = "host=127.0.0.1 port=" + parts.port + " dbname=" + parts.dbname +
                 " user=walrelay password=Pg-S3cret Tail-S3cret-Part";
  WalrelayProcess proc(cfg.to_yaml(), "walrelay (unquoted password)");

  EXPECT_EQ(run_check(proc), 1) << proc.logs();
  EXPECT_NE(proc.stdout_text().find("FAIL"), std::string::npos) << proc.stdout_text();
  expect_no_secrets(proc.stdout_text(), secrets, "walrelay check stdout");
  expect_no_secrets(proc.stderr_text(), secrets, "walrelay check stderr");

  const std::size_t run_out = proc.stdout_text().size();
  const std::size_t run_err = proc.stderr_text().size();
  proc.start();
  EXPECT_NE(proc.wait_exit(30s), WalrelayProcess::kTimedOut) << proc.logs();
  expect_no_secrets(proc.stdout_text().substr(run_out), secrets, "walrelay run stdout");
  expect_no_secrets(proc.stderr_text().substr(run_err), secrets, "walrelay run stderr");
}

// ------------------------------------------------------------------------------ listening

// 3. While streaming (connected to PostgreSQL and Kafka), walrelay has no listening TCP socket,
//    no bound unconnected UDP socket and no listening unix socket.
// With metrics.listen off, walrelay listens on nothing (the metrics endpoint's own listener is
// checked in tests/integration/metrics_test.cpp: loopback only).
TEST_F(SecurityTest, ListensOnNoSocketWithMetricsOff) {
  pg_->exec("CREATE TABLE " + table("t") + " (id int PRIMARY KEY, v text)");
  auto cfg = make_config({{table("t")}});
  cfg.metrics_listen = "";
  WalrelayProcess proc(cfg.to_yaml());
  ASSERT_NO_THROW(start_streaming(proc, name_));
  pg_->commit({"INSERT INTO " + table("t") + " VALUES (1, 'x')"});
  ASSERT_EQ(kafka_->read_at_least({topic("t")}, 1).size(), 1u) << proc.logs();

  const auto pid = walrelay_pid(proc.config_path());
  ASSERT_TRUE(pid.has_value()) << "walrelay process not found";
  const std::set<unsigned long> inodes = socket_inodes(*pid);
  ASSERT_FALSE(inodes.empty()) << "walrelay (pid " << *pid << ") has no sockets?";

  std::size_t established = 0;
  for (const std::string table : {"tcp", "tcp6", "udp", "udp6", "unix"}) {
    for (const auto& row : socket_table(*pid, table)) {
      if (!inodes.contains(row.inode)) continue;
      if (table.starts_with("tcp")) {
        if (row.state == kTcpEstablished) ++established;
        EXPECT_NE(row.state, kTcpListen) << "listening " << table << " socket: " << row.line;
      } else if (table.starts_with("udp")) {
        EXPECT_NE(row.state, kUdpUnconnected) << "bound " << table << " socket: " << row.line;
      } else {
        EXPECT_EQ(row.flags & kUnixAcceptCon, 0u) << "listening unix socket: " << row.line;
      }
    }
  }
  // The parsing above works: walrelay's connections to PostgreSQL and Kafka are found.
  EXPECT_GE(established, 2u) << "walrelay's established TCP connections not found in "
                                "/proc/<pid>/net/tcp*";

  // Cross-check with ss (listening TCP, UDP and unix sockets with their processes).
  const ShellResult ss = shell("ss -H -l -n -p -t -u -x");
  if (ss.status == 0) {
    const std::string needle = "pid=" + std::to_string(*pid) + ",";
    std::istringstream lines(ss.output);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_EQ(line.find(needle), std::string::npos) << "ss lists a walrelay listener: " << line;
    }
  } else {
    std::cout << "[security] ss unavailable (" << ss.output << "), /proc check only\n";
  }
  EXPECT_TRUE(stop_gracefully(proc, name_)) << proc.logs();
}

}  // namespace
}  // namespace walrelay::itest
