#include "walrelay/relay/relay.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <charconv>
#include <cstdlib>
#include <random>
#include <set>

#include "walrelay/core/json.hpp"
#include "walrelay/decoder/change.hpp"
#include "walrelay/decoder/wal2json_value.hpp"
#include "walrelay/kafka/security.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/relay/preflight.hpp"

namespace walrelay::relay {

namespace asio = boost::asio;
using std::chrono::milliseconds;

namespace {

constexpr int kSeamExitCode = 86;
constexpr std::size_t kMaxReason = 1000;  // bytes of a failure reason written to last_error

/// Units of a batch: the batch's sequence number above the row's index (batch <= 10000 < 2^16).
constexpr std::uint64_t unit_of(std::uint64_t batch, std::size_t row) {
  return ((batch << 16) | row) & sink::Publisher::kUnitMask;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string conninfo_options(const std::string& conninfo) {
  auto options = pg::pinned_startup_options(conninfo);
  return options ? *options : std::string();
}

/// The relay's producer: the configured one, with message.timeout.ms bounded by the ack
/// timeout (librdkafka CONFIGURATION.md), so that a record of a rolled-back batch cannot be
/// delivered long after another instance published its key's later rows.
config::KafkaConfig relay_kafka(const config::Config& cfg) {
  config::KafkaConfig k = cfg.kafka;
  k.properties.try_emplace("message.timeout.ms", std::to_string(cfg.relay.ack_timeout.count()));
  return k;
}

/// The lease variant's owner token: a random version 4 UUID (RFC 9562 §5.4) per process start, so
/// that it fits an owner column of type uuid as well as text.
std::string new_owner_token() {
  std::random_device device;
  std::mt19937_64 gen((static_cast<std::uint64_t>(device()) << 32) ^ device() ^
                      static_cast<std::uint64_t>(now_ms()));
  std::uint64_t hi = gen();
  std::uint64_t lo = gen();
  hi = (hi & ~0xf000ULL) | 0x4000ULL;            // version 4
  lo = (lo & ~(0xcULL << 60)) | (0x8ULL << 60);  // variant 10
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 32; ++i) {
    const std::uint64_t word = i < 16 ? hi : lo;
    out += kHex[(word >> (60 - 4 * (i % 16))) & 0xf];
    if (i == 7 || i == 11 || i == 15 || i == 19) out += '-';
  }
  return out;
}

}  // namespace

Relay::Relay(asio::io_context& io, config::Config cfg)
    : io_(io),
      cfg_(std::move(cfg)),
      conn_(io.get_executor(), cfg_.source.conninfo, "walrelay-relay " + cfg_.name),
      listener_(io.get_executor(), cfg_.source.conninfo, "walrelay-relay-listen " + cfg_.name),
      tick_timer_(io),
      ack_timer_(io),
      maint_(io.get_executor(), cfg_.source.conninfo, "walrelay-relay-maint " + cfg_.name),
      maint_timer_(io),
      lease_(cfg_.relay.claim == config::RelayClaim::kLease),
      owner_token_(lease_ ? new_owner_token() : std::string()) {
  conn_.set_startup_options(conninfo_options(cfg_.source.conninfo));
}

Relay::~Relay() {
  if (producer_) producer_->stop();
}

void Relay::start(app::Lifecycle& life) {
  life_ = &life;
  if (auto options = pg::pinned_startup_options(cfg_.source.conninfo); !options) {
    spdlog::error("source.conninfo: {}", options.error());
    finish(ExitCode::kConfigError);
    return;
  }
  if (const char* seam = std::getenv("WALRELAY_RELAY_TEST_CRASH_AFTER_ACK")) {
    crash_after_ack_ = seam;
    spdlog::warn(
        "test seam WALRELAY_RELAY_TEST_CRASH_AFTER_ACK is set: the relay exits once "
        "Kafka acknowledged event {} and before its COMMIT",
        crash_after_ack_);
  }
  try {
    producer_ = std::make_unique<kafka::Producer>(
        io_.get_executor(), relay_kafka(cfg_), "walrelay-relay-" + cfg_.name,
        [this](const kafka::DeliveryReport& r) { publisher_.on_delivery(r); },
        [this](const kafka::Error& e) {
          spdlog::error("Kafka producer failed: {}", e.describe());
          conn_.close();  // the claim transaction rolls back: its rows stay pending
          finish(kafka::security_failure(e) != kafka::SecurityFailure::kNone
                     ? ExitCode::kKafkaAuthFailed
                     : ExitCode::kDeliveryFailed);
        });
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    finish(ExitCode::kConfigError);
    return;
  }
  publisher_.attach(producer_.get());
  publisher_.listen(sink::RecordSource::kRelay,
                    [this](const kafka::DeliveryReport& r) { on_delivery(r); });
  producer_->start();
  spdlog::info("relay {}: source.mode poll, claim {}, batch {}, {} table(s)", cfg_.name,
               config::to_string(cfg_.relay.claim), cfg_.relay.batch, cfg_.tables.size());
  if (lease_) {
    spdlog::info("relay {}: owner token {}, lease {} ms", cfg_.name, owner_token_,
                 cfg_.relay.lease.count());
  }
  start_metrics();
  preflight_running_ = true;
  preflight(conn_, cfg_, types_, [this](PreflightResult r) { on_preflight(std::move(r)); });
}

void Relay::on_preflight(PreflightResult result) {
  preflight_running_ = false;
  if (stopping_) {
    finish(ExitCode::kOk);
    return;
  }
  if (result.error && result.error->kind == pg::ErrorKind::kTransient) {
    backoff_ = backoff_.count() == 0 ? cfg_.relay.backoff_min
                                     : std::min(backoff_ * 2, cfg_.relay.backoff_max);
    spdlog::warn("cannot read the catalog yet ({}); again in {} ms", result.error->message,
                 backoff_.count());
    tick_timer_.expires_after(backoff_);
    tick_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      types_ = router::TypeRegistry();
      preflight_running_ = true;
      preflight(conn_, cfg_, types_, [this](PreflightResult r) { on_preflight(std::move(r)); });
    });
    return;
  }
  backoff_ = milliseconds(0);
  if (result.error) {
    // The server refused who walrelay is or what it may do: retrying cannot help.
    spdlog::error("cannot read the catalog: {}", result.error->message);
    finish(result.error->kind == pg::ErrorKind::kConfiguration ? ExitCode::kConfigError
                                                               : ExitCode::kRuntimeError);
    return;
  }
  for (const std::string& w : result.warnings) spdlog::warn("{}", w);
  if (!result.problems.empty()) {
    for (const std::string& p : result.problems) spdlog::error("{}", p);
    finish(ExitCode::kConfigError);
    return;
  }
  tables_ = std::move(result.tables);
  for (const OutboxTable& t : tables_) {
    claim_sql_.push_back(lease_ ? lease_claim_sql(t, cfg_.relay.batch, cfg_.relay.failed_blocks_key)
                                : claim_sql(t, cfg_.relay.batch, cfg_.relay.failed_blocks_key));
  }
  started_ = true;
  db_ok_ = true;  // the preflight's queries were answered
  asio::co_spawn(io_, maintain(), asio::detached);
  listen();
  schedule(milliseconds(0));
}

void Relay::listen() {
  if (cfg_.relay.notify_channel.empty() || listener_.busy()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - listened_at_ < std::chrono::seconds(1)) return;
  listened_at_ = now;
  listener_.on_notification([this](const std::string&, const std::string&) {
    if (in_tick_) {
      tick_again_ = true;  // coalesced: one more tick after this one
    } else if (!backoff_.count()) {
      schedule(milliseconds(0));
    }
  });
  // Also run at the backstop polls (at most once a second): LISTEN again is a no-op on a live
  // session and listens anew on one that reconnected.
  listener_.query("LISTEN " + pg::quote_ident(cfg_.relay.notify_channel), {},
                  [](const pg::AsyncConnection::Result& r) {
                    if (!r)
                      spdlog::warn("LISTEN failed (polling only until it works): {}", r.error());
                  });
}

void Relay::schedule(milliseconds delay) {
  if (stopping_) return;
  tick_timer_.expires_after(delay);
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void Relay::tick() {
  if (stopping_ || in_tick_) return;
  if (publisher_.in_flight_events(sink::RecordSource::kRelay) > 0) {
    // Records of a batch that timed out are still in the producer (they end within
    // message.timeout.ms): a new claim must not publish a key's rows before they are done.
    schedule(milliseconds(50));
    return;
  }
  in_tick_ = true;
  ++ticks_;
  tick_again_ = false;
  full_batch_ = false;
  table_ = 0;
  claim_next_table();
}

void Relay::claim_next_table() {
  if (stopping_) {
    end_tick();
    return;
  }
  if (table_ == tables_.size()) {
    end_tick();
    return;
  }
  if (lease_) {
    // The claim is one statement, its own short transaction: nothing stays open while Kafka is
    // waited on (docs/relay.md "The lease variant").
    const OutboxTable& t = tables_[table_];
    std::vector<std::optional<std::string>> params{t.poll->pending, t.poll->retry_wait,
                                                   t.poll->claimed, owner_token_,
                                                   std::to_string(cfg_.relay.lease.count())};
    if (cfg_.relay.failed_blocks_key) params.emplace_back(t.poll->failed);
    conn_.query_params(claim_sql_[table_], std::move(params), {},
                       [this](pg::AsyncConnection::Result res) { on_claimed(std::move(res)); });
    return;
  }
  // One statement after the other, each from the previous one's answer: a statement is never
  // queued behind one that failed, so none runs on a session that reconnected outside the
  // transaction.
  conn_.query("BEGIN", {}, [this](const pg::AsyncConnection::Result& r) {
    if (!r) {
      fail_tick("BEGIN failed: " + r.error(), false);
      return;
    }
    txn_open_ = true;
    const OutboxTable& t = tables_[table_];
    std::vector<std::optional<std::string>> params{t.poll->pending};
    if (cfg_.relay.failed_blocks_key) params.emplace_back(t.poll->failed);
    conn_.query_params(claim_sql_[table_], std::move(params), {},
                       [this](pg::AsyncConnection::Result res) { on_claimed(std::move(res)); });
  });
}

void Relay::on_claimed(pg::AsyncConnection::Result result) {
  if (!result) {
    fail_tick("the claim of " + tables_[table_].name() + " failed: " + result.error(), true);
    return;
  }
  if (result->empty() && lease_) {
    backoff_ = milliseconds(0);
    ++table_;
    claim_next_table();
    return;
  }
  if (result->empty()) {
    conn_.query("COMMIT", {}, [this](const pg::AsyncConnection::Result& r) {
      if (!r) {
        fail_tick("COMMIT failed: " + r.error(), false);
        return;
      }
      txn_open_ = false;
      backoff_ = milliseconds(0);  // PostgreSQL answers again: notifications wake it again
      ++table_;
      claim_next_table();
    });
    return;
  }
  if (result->size() >= cfg_.relay.batch) full_batch_ = true;
  ++batches_;
  publish_rows(*result);
}

void Relay::publish_rows(const pg::AsyncConnection::Rows& rows) {
  const OutboxTable& t = tables_[table_];
  ++batch_seq_;
  rows_.clear();
  rows_.resize(rows.size());
  waiting_ = 0;
  std::vector<decoder::Column> columns(t.columns.size());
  std::vector<std::string> names_json(t.columns.size());
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    json::append_string(names_json[i], t.columns[i].first);
  }
  std::string tokens;
  std::vector<std::size_t> ends(t.columns.size());
  std::set<std::string> stopped;  // keys with a row not published in this batch
  const auto where = [&] { return "outbox table " + t.name(); };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    Row& row = rows_[i];
    row.tid = r[0].value_or("");
    std::from_chars(r[1] ? r[1]->data() : nullptr, r[1] ? r[1]->data() + r[1]->size() : nullptr,
                    row.outcome.attempts);
    const auto& key = r[2 + t.key_column];
    row.outcome.key = key.value_or("");
    row.event_id = r[2].value_or("");
    if (stopped.contains(row.outcome.key)) {
      row.outcome.state = RowState::kNotPublished;
      continue;
    }
    // The row's values as wal2json format-version 2 prints them, then the shared builder.
    tokens.clear();
    bool numbers_ok = true;
    for (std::size_t c = 0; c < t.columns.size() && numbers_ok; ++c) {
      std::optional<std::string_view> text;
      if (r[2 + c]) text = *r[2 + c];
      numbers_ok = decoder::append_wal2json_value(tokens, text, t.columns[c].second,
                                                  decoder::NumericTokens::kNumbers);
      ends[c] = tokens.size();
    }
    std::string reason;
    if (!numbers_ok) {
      reason = where() + ": a numeric value is not a number";
    } else {
      std::size_t begin = 0;
      const std::string_view all(tokens);
      for (std::size_t c = 0; c < t.columns.size(); ++c) {
        columns[c] = decoder::Column{t.columns[c].first, names_json[c], t.columns[c].second,
                                     all.substr(begin, ends[c] - begin)};
        begin = ends[c];
      }
      // Without a timestamp column the record's time is the publish time: a SELECT cannot know
      // the commit time the WAL mode uses (docs/relay.md "Same events as the WAL mode").
      if (auto built = builder_.build(*t.outbox, columns, now_ms(), where, buffer_); !built) {
        reason = built.error().reason;
      }
    }
    if (!reason.empty()) {
      row.outcome.state = RowState::kBuildFailed;
      row.outcome.reason = std::move(reason);
      if (cfg_.relay.failed_blocks_key) stopped.insert(row.outcome.key);
      continue;
    }
    const sink::PublishResult pub =
        publisher_.publish(sink::RecordSource::kRelay, buffer_.record(), unit_of(batch_seq_, i));
    if (pub.queued()) {
      row.outcome.state = RowState::kWaiting;
      ++waiting_;
      // A row that failed before is published alone on its key: its key's later rows wait
      // for it here instead of being published again with each of its tries.
      if (row.outcome.attempts > 0) stopped.insert(row.outcome.key);
      continue;
    }
    stopped.insert(row.outcome.key);
    if (pub.status == sink::PublishStatus::kTooLarge) {
      row.outcome.state = RowState::kRefusedForGood;
    } else if (pub.status == sink::PublishStatus::kQueueFull) {
      row.outcome.state = RowState::kNotPublished;
    } else {
      row.outcome.state = classify_delivery(pub.code);
      if (row.outcome.state == RowState::kAcked) row.outcome.state = RowState::kOther;
    }
    row.outcome.reason = std::string("Kafka refused the record: ") + pub.error();
  }
  if (waiting_ == 0) {
    reports_done();
    return;
  }
  awaiting_reports_ = true;
  // The claim transaction is bounded: past ack_timeout (plus a second for librdkafka's own
  // message.timeout.ms reports to arrive first) the batch is decided without the missing reports.
  ack_timer_.expires_after(cfg_.relay.ack_timeout + milliseconds(1000));
  ack_timer_.async_wait([this, seq = batch_seq_](const boost::system::error_code& ec) {
    if (ec || seq != batch_seq_ || !awaiting_reports_) return;
    spdlog::warn("relay: {} delivery report(s) of a batch of {} did not arrive within {} ms",
                 waiting_, rows_.size(), cfg_.relay.ack_timeout.count());
    reports_done();
  });
}

void Relay::on_delivery(const kafka::DeliveryReport& report) {
  const std::uint64_t seq = report.opaque >> 16;
  const std::size_t index = report.opaque & 0xffff;
  if (!awaiting_reports_ || seq != (batch_seq_ & (sink::Publisher::kUnitMask >> 16)) ||
      index >= rows_.size() || rows_[index].outcome.state != RowState::kWaiting) {
    return;  // a report of a batch already decided (timed out): its rows were left pending
  }
  RowOutcome& o = rows_[index].outcome;
  o.state = classify_delivery(report.err);
  if (o.state == RowState::kAcked) {
    ++published_;  // acknowledged by the broker: the exit summary's "published"
  } else {
    o.reason = report.error().describe();
  }
  if (--waiting_ == 0) reports_done();
}

void Relay::reports_done() {
  awaiting_reports_ = false;
  ack_timer_.cancel();
  std::vector<RowOutcome> outcomes;
  outcomes.reserve(rows_.size());
  for (const Row& r : rows_) outcomes.push_back(r.outcome);
  if (!crash_after_ack_.empty()) {
    for (const Row& r : rows_) {
      if (r.event_id == crash_after_ack_ && r.outcome.state == RowState::kAcked) {
        spdlog::warn("test seam: Kafka acknowledged event {}; exiting before the COMMIT",
                     crash_after_ack_);
        spdlog::default_logger()->flush();
        std::_Exit(kSeamExitCode);
      }
    }
  }
  const BatchDecision decision =
      decide(outcomes, cfg_.relay.max_attempts, cfg_.relay.failed_blocks_key);
  if (decision.rollback) {
    std::string why;
    for (const Row& r : rows_) {
      if (!r.outcome.reason.empty()) {
        why = r.outcome.reason;
        break;
      }
    }
    std::string message = "Kafka acknowledged no record of a batch of " +
                          std::to_string(rows_.size()) +
                          (why.empty() ? std::string(" (timed out)") : ": " + why);
    if (lease_) {
      release_all(std::move(message));
      return;
    }
    fail_tick(message, true);
    return;
  }
  write_back(decision);
}

void Relay::write_back(const BatchDecision& decision) {
  auto d = std::make_shared<BatchDecision>(decision);
  if (!lease_) {
    mark_sent(d);
    return;
  }
  // The lease variant's second short transaction: only rows this token still holds change.
  conn_.query("BEGIN", {}, [this, d](const pg::AsyncConnection::Result& r) {
    if (!r) {
      fail_tick("BEGIN failed: " + r.error(), false);
      return;
    }
    txn_open_ = true;
    mark_sent(d);
  });
}

void Relay::mark_sent(const std::shared_ptr<BatchDecision>& d) {
  if (d->sent.empty()) {
    write_failures(d, 0);
    return;
  }
  std::vector<std::string> tids;
  tids.reserve(d->sent.size());
  for (std::size_t i : d->sent) tids.push_back(rows_[i].tid);
  const OutboxTable& t = tables_[table_];
  std::vector<std::optional<std::string>> params{t.poll->sent, tid_array(tids)};
  if (lease_) {
    params.emplace_back(owner_token_);
    params.emplace_back(t.poll->claimed);
  }
  conn_.query_params(lease_ ? lease_mark_sent_sql(t) : mark_sent_sql(t), std::move(params), {},
                     [this, d](const pg::AsyncConnection::Result& r) {
                       if (!r) {
                         fail_tick("marking rows sent failed: " + r.error(), true,
                                   conn_.last_error().kind);
                         return;
                       }
                       const std::size_t changed = lease_ ? r->size() : d->sent.size();
                       if (changed < d->sent.size()) lease_lost(d->sent.size() - changed);
                       sent_ += changed;
                       write_failures(d, 0);
                     });
}

void Relay::lease_lost(std::size_t rows) {
  spdlog::warn(
      "relay: {} row(s) of a batch of {} were no longer claimed by this relay when marked (the "
      "lease of {} ms passed; another instance publishes them again, at least once)",
      rows, rows_.size(), cfg_.relay.lease.count());
}

void Relay::release_rest(const std::shared_ptr<BatchDecision>& d) {
  // Rows neither sent nor failed (behind their key's first failure, or not published) go back to
  // pending without an attempt; in claim: transaction the COMMIT leaves them pending.
  std::vector<bool> decided(rows_.size(), false);
  for (std::size_t i : d->sent) decided[i] = true;
  for (const RowFailure& f : d->failures) decided[f.row] = true;
  std::vector<std::string> tids;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (!decided[i]) tids.push_back(rows_[i].tid);
  }
  if (!lease_ || tids.empty()) {
    commit();
    return;
  }
  const OutboxTable& t = tables_[table_];
  conn_.query_params(
      lease_release_sql(t), {t.poll->pending, tid_array(tids), owner_token_, t.poll->claimed}, {},
      [this](const pg::AsyncConnection::Result& r) {
        if (!r) {
          fail_tick("giving claimed rows back failed: " + r.error(), true, conn_.last_error().kind);
          return;
        }
        commit();
      });
}

void Relay::release_all(std::string why) {
  std::vector<std::string> tids;
  tids.reserve(rows_.size());
  for (const Row& r : rows_) tids.push_back(r.tid);
  const OutboxTable& t = tables_[table_];
  // One statement, its own transaction: the batch goes back to pending, no attempt counted.
  conn_.query_params(
      lease_release_sql(t), {t.poll->pending, tid_array(tids), owner_token_, t.poll->claimed}, {},
      [this, why = std::move(why)](const pg::AsyncConnection::Result& r) {
        if (!r) {
          fail_tick(why + "; giving the batch back failed too (its lease ends it): " + r.error(),
                    false);
          return;
        }
        fail_tick(why, true);
      });
}

void Relay::write_failures(std::shared_ptr<BatchDecision> d, std::size_t next) {
  if (next == d->failures.size()) {
    release_rest(d);
    return;
  }
  const RowFailure& f = d->failures[next];
  const OutboxTable& t = tables_[table_];
  const Row& row = rows_[f.row];
  std::string reason = f.reason.substr(0, kMaxReason);
  if (f.failed) {
    spdlog::warn("relay: event {} of {} is now {}: {}", row.event_id, t.name(), t.poll->failed,
                 reason);
  }
  // Under a lease a row that failed but may be tried again waits as retry_wait (claimable like
  // pending); in claim: transaction it stays pending.
  const std::string& again = lease_ ? t.poll->retry_wait : t.poll->pending;
  std::vector<std::optional<std::string>> params{f.count_attempt ? "1" : "0",
                                                 f.failed ? t.poll->failed : again, row.tid};
  if (lease_) {
    params.emplace_back(owner_token_);
    params.emplace_back(t.poll->claimed);
  }
  if (!t.poll->last_error.empty()) params.emplace_back(std::move(reason));
  conn_.query_params(lease_ ? lease_mark_failure_sql(t) : mark_failure_sql(t), std::move(params),
                     {}, [this, d, next](const pg::AsyncConnection::Result& r) {
                       if (!r) {
                         fail_tick("recording a failed row failed: " + r.error(), true,
                                   conn_.last_error().kind);
                         return;
                       }
                       if (lease_ && r->empty()) {
                         lease_lost(1);
                       } else if (d->failures[next].failed) {
                         ++failed_;
                       }
                       write_failures(d, next + 1);
                     });
}

void Relay::commit() {
  conn_.query("COMMIT", {}, [this](const pg::AsyncConnection::Result& r) {
    if (!r) {
      fail_tick("COMMIT failed: " + r.error(), false);
      return;
    }
    txn_open_ = false;
    backoff_ = milliseconds(0);
    rows_.clear();
    ++table_;
    claim_next_table();
  });
}

void Relay::fail_tick(const std::string& why, bool rollback, pg::ErrorKind kind) {
  awaiting_reports_ = false;
  ack_timer_.cancel();
  rows_.clear();
  ++rollbacks_;
  last_failure_ = why;
  if (kind == pg::ErrorKind::kStatement) {
    // The table refuses what the relay writes (a constraint, a trigger, a changed column): every
    // tick would publish the batch again and fail the same way. Stop instead; the rows stay
    // pending and are published again (at least once) when the table is fixed.
    spdlog::error(
        "relay: {}; rolled back and stopping: the table refuses what the relay writes, and "
        "retrying would publish the same rows again at every tick ({})",
        why, "docs/relay.md \"Checks\"");
    if (txn_open_) {
      conn_.query("ROLLBACK", {}, [this](const pg::AsyncConnection::Result& r) {
        if (!r) conn_.close();
      });
    }
    txn_open_ = false;
    in_tick_ = false;
    finish(ExitCode::kRuntimeError);
    return;
  }
  const milliseconds min = cfg_.relay.backoff_min;
  backoff_ = backoff_.count() == 0 ? min : std::min(backoff_ * 2, cfg_.relay.backoff_max);
  spdlog::warn("relay: {}; rolled back, next tick in {} ms", why, backoff_.count());
  if (rollback && txn_open_) {
    conn_.query("ROLLBACK", {}, [this](const pg::AsyncConnection::Result& r) {
      if (!r) conn_.close();  // the server rolls back the session's transaction
    });
  } else if (!rollback) {
    conn_.close();
  }
  txn_open_ = false;
  in_tick_ = false;
  if (stopping_) {
    finish(ExitCode::kOk);
    return;
  }
  schedule(backoff_);
}

void Relay::end_tick() {
  in_tick_ = false;
  if (stopping_) {
    finish(ExitCode::kOk);
    return;
  }
  if (full_batch_ || tick_again_) {
    schedule(milliseconds(0));
    return;
  }
  listen();  // a no-op while the listening session lives
  schedule(cfg_.relay.poll_interval);
}

void Relay::stop(app::StopMode mode) {
  stopping_ = true;
  tick_timer_.cancel();
  if (preflight_running_ && mode == app::StopMode::kGraceful) return;  // its answer ends it
  if (in_tick_ && mode == app::StopMode::kGraceful) return;  // the tick ends it (ack_timeout)
  // Now: the open claim transaction (if any) is dropped with the session: its rows stay
  // pending and are published again by the next start.
  conn_.close();
  listener_.close();
  maint_.close();
  finish(ExitCode::kOk);
}

void Relay::finish(ExitCode code) {
  if (life_ == nullptr) return;
  tick_timer_.cancel();
  ack_timer_.cancel();
  maint_timer_.cancel();
  if (http_) http_->stop();
  spdlog::info("relay {}: {} record(s) published, {} row(s) marked sent", cfg_.name, published_,
               sent_);
  app::Lifecycle* life = life_;
  life_ = nullptr;
  life->done(code);
}

}  // namespace walrelay::relay
