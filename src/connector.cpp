#include "connector.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <csignal>
#include <map>

#include "walrelay/decoder/plugin_options.hpp"

namespace walrelay {

namespace asio = boost::asio;

namespace {

bool has_partial_glob(const std::string& part) {
  return part != "*" && part.find('*') != std::string::npos;
}

// Turns a `*` glob into a LIKE pattern (backslash is LIKE's default escape character).
std::string glob_to_like(const std::string& glob) {
  std::string out;
  for (char c : glob) {
    if (c == '*') {
      out.push_back('%');
    } else {
      if (c == '%' || c == '_' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
  }
  return out;
}

std::string version_string() {
  return WALRELAY_VERSION;
}

}  // namespace

Connector::Connector(asio::io_context& io, config::Config cfg)
    : io_(io),
      cfg_(std::move(cfg)),
      stream_(io.get_executor(), cfg_.source.conninfo, "walrelay-" + cfg_.name),
      status_timer_(io),
      progress_timer_(io),
      signals_(io, SIGINT, SIGTERM) {}

Connector::~Connector() = default;

bool Connector::prepare() {
  auto sys = stream_.connect();
  if (!sys) {
    spdlog::error("{}", sys.error());
    return false;
  }
  system_ = *sys;

  if (auto wal_level = stream_.query("SHOW wal_level"); !wal_level) {
    spdlog::error("cannot read wal_level: {}", wal_level.error());
    return false;
  } else if (wal_level->empty() || (*wal_level)[0][0].value_or("") != "logical") {
    spdlog::error(
        "wal_level is '{}': logical decoding needs wal_level=logical (PostgreSQL docs "
        "§20.5.1); set it in postgresql.conf and restart the server",
        wal_level->empty() ? "" : (*wal_level)[0][0].value_or(""));
    return false;
  }

  const std::string& slot = cfg_.source.slot;
  auto found = stream_.find_slot(slot);
  if (!found) {
    spdlog::error("cannot look up slot {}: {}", slot, found.error());
    return false;
  }
  if (!*found) {
    if (!cfg_.source.create_slot) {
      spdlog::error("replication slot '{}' does not exist and source.create_slot is false", slot);
      return false;
    }
    // SNAPSHOT 'nothing' while walrelay only streams; an initial load will create the slot with
    // 'export' and read the snapshot before START_REPLICATION.
    auto created = stream_.create_slot(slot, "wal2json", "nothing");
    if (!created) {
      spdlog::error("cannot create replication slot '{}': {}", slot, created.error());
      return false;
    }
    spdlog::info("created replication slot {} (plugin wal2json) at consistent point {}", slot,
                 created->first.to_string());
    start_lsn_ = created->first;
  } else {
    const auto& s = **found;
    if (s.slot_type != "logical") {
      spdlog::error("replication slot '{}' is a {} slot; walrelay needs a logical slot", slot,
                    s.slot_type);
      return false;
    }
    if (s.plugin != "wal2json") {
      spdlog::error(
          "replication slot '{}' uses output plugin '{}'; walrelay needs 'wal2json'. "
          "Drop it or configure another source.slot",
          slot, s.plugin);
      return false;
    }
    if (s.database != system_.dbname) {
      spdlog::error("replication slot '{}' belongs to database '{}', not '{}'", slot, s.database,
                    system_.dbname);
      return false;
    }
    if (s.wal_status == "lost") {
      spdlog::error(
          "replication slot '{}' is invalidated (wal_status=lost): changes after {} may "
          "be gone. Not streaming from it",
          slot, s.confirmed_flush_lsn.to_string());
      return false;
    }
    if (s.active) {
      spdlog::error("replication slot '{}' is in use by another process (active_pid {})", slot,
                    s.active_pid.value_or(0));
      return false;
    }
    start_lsn_ = s.confirmed_flush_lsn;
  }
  tracker_.set_confirmed(start_lsn_);
  last_sent_flush_ = start_lsn_;

  catalog_ =
      std::make_unique<Catalog>(cfg_.source.conninfo, "walrelay-catalog-" + cfg_.name, types_);
  if (auto connected = catalog_->connect(); !connected) {
    spdlog::error("{}", connected.error());
    return false;
  }
  router_ = std::make_unique<router::EventRouter>(
      router::RouterSettings{cfg_.name, cfg_.topics.prefix, system_.dbname, version_string(),
                             cfg_.events},
      cfg_, catalog_.get(), types_);

  // Look the configured tables up: name them in the summary, detect topic collisions, and warn
  // about tables whose UPDATE/DELETE wal2json would drop silently (shared/cases/README.md item 4).
  std::vector<decoder::TableFilter> filters;
  bool filter_on_server = true;
  std::vector<std::string> routes;            // "schema.table → topic" for the summary
  std::map<std::string, std::string> topics;  // topic → the table publishing to it
  for (const auto& tc : cfg_.tables) {
    if (has_partial_glob(tc.schema_pattern) || has_partial_glob(tc.table_pattern)) {
      filter_on_server = false;  // wal2json's add-tables only knows a whole `*`
    }
    filters.push_back({tc.schema_pattern, tc.table_pattern});
    auto rows = stream_.query(
        "SELECT n.nspname, c.relname, c.relreplident, "
        "EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary "
        "AND i.indimmediate), c.relkind "
        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg\\_toast%' "
        "AND n.nspname LIKE " +
        replication::quote_literal(glob_to_like(tc.schema_pattern)) + " AND c.relname LIKE " +
        replication::quote_literal(glob_to_like(tc.table_pattern)) + " ORDER BY 1, 2");
    if (!rows) {
      spdlog::error("cannot look up tables for '{}': {}", tc.name, rows.error());
      return false;
    }
    if (rows->empty()) {
      spdlog::warn("tables entry '{}' matches no table yet", tc.name);
    }
    for (const auto& r : *rows) {
      const std::string schema = r[0].value_or("");
      const std::string table = r[1].value_or("");
      if (r[4].value_or("r") == "p") {
        // wal2json reports a partitioned table's changes under its leaves' names (shared/cases/
        // README.md item 10): filtering by the root's name on the server would match nothing.
        filter_on_server = false;
      }
      const auto role = router_->role_of(schema, table);
      if (role == router::TableRole::kOutbox) {
        routes.push_back(schema + "." + table + " (outbox)");
        continue;
      }
      if (role != router::TableRole::kRowChange) continue;  // excluded
      const std::string topic = router_->topic_of(schema, table);
      const std::string qualified = schema + "." + table;
      routes.push_back(qualified + " → " + topic);
      if (topic.size() > 249) {
        spdlog::error(
            "table {} maps to topic '{}', longer than Kafka's 249 characters; set a "
            "shorter `topic` for it",
            qualified, topic);
        prepare_exit_ = ExitCode::kConfigError;
        return false;
      }
      if (auto [it, inserted] = topics.emplace(topic, qualified); !inserted) {
        spdlog::error(
            "tables {} and {} would both publish to topic '{}' (names are mapped to "
            "Kafka's [A-Za-z0-9._-]); give one of them its own `topic`",
            it->second, qualified, topic);
        prepare_exit_ = ExitCode::kConfigError;
        return false;
      }
      const std::string ident = r[2].value_or("d");
      const bool has_pk = r[3].value_or("f") == "t";
      if (ident == "n") {
        spdlog::warn(
            "table {}.{} has REPLICA IDENTITY NOTHING: wal2json drops its UPDATE and "
            "DELETE changes without a trace. Set REPLICA IDENTITY DEFAULT (with a primary "
            "key) or FULL",
            schema, table);
      } else if (ident == "d" && !has_pk) {
        spdlog::warn(
            "table {}.{} has REPLICA IDENTITY DEFAULT but no usable (non-deferrable) "
            "primary key: wal2json drops its UPDATE and DELETE changes without a trace. "
            "Add a primary key or set REPLICA IDENTITY FULL",
            schema, table);
      }
    }
  }
  if (!filter_on_server) {
    spdlog::info(
        "a tables pattern uses a partial glob or matches a partitioned table: filtering tables "
        "in walrelay instead of wal2json's add-tables");
  }
  std::vector<std::string> prefixes;
  for (const auto& m : cfg_.messages) prefixes.push_back(m.prefix);
  plugin_options_ =
      decoder::wal2json_options(filter_on_server ? std::optional(filters) : std::nullopt, prefixes);
  std::string summary;
  for (const auto& r : routes) summary += (summary.empty() ? "" : ", ") + r;
  spdlog::info("tables ({}): {}", routes.size(), summary.empty() ? "none yet" : summary);
  return true;
}

ExitCode Connector::run() {
  spdlog::info("walrelay {} starting connector '{}'", version_string(), cfg_.name);
  if (!prepare()) {
    stream_.close();
    return prepare_exit_;
  }
  try {
    producer_ = std::make_unique<sink::KafkaProducer>(
        io_.get_executor(), cfg_.kafka, "walrelay-" + cfg_.name,
        [this](const sink::DeliveryReport& r) { on_delivery(r); },
        [this](const std::string& reason) {
          spdlog::error(
              "Kafka producer fatal error: {}; not confirming anything past the "
              "unacknowledged events",
              reason);
          shutdown(ExitCode::kDeliveryFailed);
        });
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    stream_.close();
    return ExitCode::kConfigError;
  }
  producer_->start();

  replication::ReplicationStream::Handlers handlers{
      [this](const replication::XLogData& x) { on_xlogdata(x); },
      [this](const replication::Keepalive& k) { on_keepalive(k); },
      [this](replication::StreamEnd how, const std::string& reason) {
        on_stream_end(how, reason);
      }};
  // 0/0: the server resumes from the slot's confirmed_flush_lsn.
  if (auto started = stream_.start(cfg_.source.slot, Lsn{}, plugin_options_, std::move(handlers));
      !started) {
    spdlog::error("START_REPLICATION failed: {}", started.error());
    producer_->stop();
    stream_.close();
    return ExitCode::kRuntimeError;
  }
  spdlog::info(
      "streaming: server {} (system {}, timeline {}), database {}, slot {} from "
      "confirmed_flush_lsn {}, server WAL at {}, topic prefix '{}', kafka {}",
      system_.server_version, system_.system_id, system_.timeline, system_.dbname, cfg_.source.slot,
      start_lsn_.to_string(), system_.xlogpos.to_string(), cfg_.topics.prefix,
      cfg_.kafka.bootstrap_servers);

  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received signal {}: flushing and stopping", sig);
    shutdown(ExitCode::kOk);
  });
  last_progress_ = std::chrono::steady_clock::now();
  schedule_status();
  schedule_progress();
  io_.run();
  return exit_code_.value_or(ExitCode::kRuntimeError);
}

void Connector::on_xlogdata(const replication::XLogData& x) {
  if (stopping_) return;
  if (x.data_start > received_lsn_) received_lsn_ = x.data_start;
  auto decoded = decoder_.decode(x.data);
  if (!decoded) {
    fail_mapping("cannot decode wal2json output at LSN " + x.data_start.to_string() + ": " +
                 decoded.error().reason);
    return;
  }
  const decoder::Change& c = **decoded;
  using decoder::Action;
  switch (c.action) {
    case Action::kBegin: {
      if (in_txn_) {
        fail_mapping("wal2json sent BEGIN inside a transaction at LSN " + c.lsn.to_string());
        return;
      }
      tracker_.begin(c.next_lsn);
      in_txn_ = true;
      router_->begin(c.xid, c.lsn, router::parse_commit_timestamp_ms(c.timestamp).value_or(0));
      return;
    }
    case Action::kCommit:
      if (!in_txn_) {
        fail_mapping("wal2json sent COMMIT outside a transaction at LSN " + c.lsn.to_string());
        return;
      }
      pending_ = router_->commit();
      pending_next_ = 0;
      pending_after_ = AfterPublish::kCommit;
      pending_lsn_ = c.lsn;
      publish_pending();
      return;
    default:
      break;
  }
  // A non-transactional logical message arrives outside any B/C pair (shared/cases/README.md
  // item 8): track it as its own unit, confirmed at the end of its record.
  const bool standalone = !in_txn_;
  if (standalone) tracker_.begin(c.lsn);
  auto routed = router_->route(c);
  if (!routed) {
    fail_mapping(routed.error().reason + " (xid " + std::to_string(c.xid) + ", LSN " +
                 c.lsn.to_string() + ")");
    return;
  }
  pending_ = *routed;
  pending_next_ = 0;
  pending_after_ = standalone ? AfterPublish::kStandalone : AfterPublish::kChange;
  pending_lsn_ = c.lsn;
  if (!publish_pending()) return;
  apply_backpressure();
}

bool Connector::publish_pending() {
  while (pending_next_ < pending_.size()) {
    const Record& rec = pending_[pending_next_];
    const auto seq = *tracker_.open_txn();
    const rd_kafka_resp_err_t err = producer_->produce(rec, seq);
    if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      // librdkafka's queue limits (possibly lowered in kafka.properties) are full: wait for
      // delivery reports to free room, then publish the rest of this change (the records stay
      // valid: nothing is decoded or routed while the stream is paused).
      stream_.pause();
      return false;
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      spdlog::error(
          "cannot publish to topic {} (key {}, transaction ending at LSN {}, change at "
          "LSN {}): {}",
          rec.topic, rec.key ? std::string(*rec.key) : std::string("null"),
          tracker_.next_lsn_of(seq).value_or(Lsn{}).to_string(), pending_lsn_.to_string(),
          rd_kafka_err2str(err));
      pending_ = {};
      shutdown(ExitCode::kDeliveryFailed);
      return false;
    }
    tracker_.add_event(sink::record_bytes(rec));
    ++events_total_;
    ++pending_next_;
  }
  pending_ = {};
  pending_next_ = 0;
  switch (pending_after_) {
    case AfterPublish::kChange:
      break;
    case AfterPublish::kStandalone:
      tracker_.commit();
      break;
    case AfterPublish::kCommit:
      tracker_.commit();
      in_txn_ = false;
      break;
  }
  return true;
}

void Connector::apply_backpressure() {
  if (stream_.paused() || stopping_) return;
  if (tracker_.in_flight_events() >= cfg_.kafka.max_in_flight_events ||
      tracker_.in_flight_bytes() >= cfg_.kafka.max_in_flight_bytes) {
    spdlog::debug("backpressure: {} events / {} bytes in flight, pausing the slot",
                  tracker_.in_flight_events(), tracker_.in_flight_bytes());
    stream_.pause();
  }
}

void Connector::on_delivery(const sink::DeliveryReport& r) {
  if (r.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    tracker_.on_ack(r.opaque, r.bytes);
  } else {
    const auto lsn = tracker_.next_lsn_of(r.opaque);
    tracker_.on_failure(r.opaque, r.bytes);
    if (!stopping_) {
      spdlog::error(
          "delivery failed for good: topic {}, key {}, transaction ending at LSN {}: {}; "
          "not confirming this transaction or anything after it",
          r.topic, r.key.empty() ? std::string("null") : std::string(r.key),
          lsn ? lsn->to_string() : std::string("?"), rd_kafka_err2str(r.err));
      shutdown(ExitCode::kDeliveryFailed);
    }
    return;
  }
  if (!stream_.paused() || stopping_) return;
  if (!pending_.empty() && !publish_pending()) return;
  if (tracker_.in_flight_events() < cfg_.kafka.max_in_flight_events &&
      tracker_.in_flight_bytes() < cfg_.kafka.max_in_flight_bytes) {
    stream_.resume();
  }
}

void Connector::on_keepalive(const replication::Keepalive& k) {
  if (k.wal_end > server_wal_end_) server_wal_end_ = k.wal_end;
  // Nothing open or in flight: the server's WAL end is safe to confirm, so an idle database (or
  // one whose writes are all filtered out) does not pile up WAL behind the slot.
  if (!in_txn_) tracker_.advance_idle(k.wal_end);
  if (k.reply_requested) send_status(false);
}

void Connector::send_status(bool reply_requested) {
  const Lsn flush = tracker_.flush_lsn();
  const Lsn write = std::max(received_lsn_, flush);
  stream_.send_status(write, flush, flush, reply_requested);
  last_sent_flush_ = flush;
}

void Connector::schedule_status() {
  status_timer_.expires_after(cfg_.source.status_interval);
  status_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    send_status(false);
    schedule_status();
  });
}

void Connector::schedule_progress() {
  progress_timer_.expires_after(cfg_.log.progress_interval);
  progress_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_) return;
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - last_progress_).count();
    const double rate =
        secs > 0 ? static_cast<double>(events_total_ - events_at_last_progress_) / secs : 0;
    const Lsn flush = tracker_.flush_lsn();
    const std::uint64_t lag = server_wal_end_ > flush ? server_wal_end_.value() - flush.value() : 0;
    spdlog::info(
        "progress: {:.0f} events/s, {} events total, flush_lsn {}, lag {} bytes, "
        "in flight {} events / {} bytes{}",
        rate, events_total_, flush.to_string(), lag, tracker_.in_flight_events(),
        tracker_.in_flight_bytes(), stream_.paused() ? " (paused: backpressure)" : "");
    events_at_last_progress_ = events_total_;
    last_progress_ = now;
    schedule_progress();
  });
}

void Connector::fail_mapping(const std::string& reason) {
  spdlog::error("{}; stopping without confirming past it", reason);
  shutdown(ExitCode::kMappingFailed);
}

void Connector::on_stream_end(replication::StreamEnd how, const std::string& reason) {
  if (stopping_) return;
  spdlog::error("replication stream ended ({}): {}",
                how == replication::StreamEnd::kServerEnded ? "server" : "error", reason);
  shutdown(ExitCode::kRuntimeError);
}

void Connector::shutdown(ExitCode code) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = code;
  stream_.pause();
  status_timer_.cancel();
  progress_timer_.cancel();
  boost::system::error_code ec;
  signals_.cancel(ec);
  // Defer the blocking part: shutdown may be called from inside a delivery report.
  asio::post(io_, [this] {
    if (producer_) {
      const int left = producer_->flush(cfg_.kafka.flush_timeout);
      if (left > 0) {
        spdlog::warn(
            "{} events were not acknowledged within kafka.flush_timeout; they will be "
            "sent again on restart",
            left);
        producer_->purge();
      }
      producer_->stop();
    }
    const Lsn flush = tracker_.flush_lsn();
    if (stream_.send_status_blocking(std::max(received_lsn_, flush), flush, flush)) {
      spdlog::info("confirmed flush_lsn {} to the server", flush.to_string());
    } else {
      spdlog::warn("could not send the last standby status update; the server keeps flush_lsn {}",
                   last_sent_flush_.to_string());
    }
    stream_.close();
    io_.stop();
  });
}

}  // namespace walrelay
