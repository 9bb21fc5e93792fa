#include "walrelay/snapshot/snapshotter.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>

#include "walrelay/core/json.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay::snapshot {

namespace asio = boost::asio;

namespace {

std::string qualified(const std::string& schema, const std::string& table) {
  return pg::quote_ident(schema) + "." + pg::quote_ident(table);
}

std::chrono::microseconds now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
}

}  // namespace

Snapshotter::Snapshotter(asio::any_io_executor executor, Settings settings,
                         router::EventRouter& router, router::SchemaProvider& schemas,
                         sink::Publisher& publisher, SnapshotProgressStore& store,
                         SnapshotProgress progress, std::string exported_snapshot, Done done)
    : executor_(std::move(executor)),
      settings_(std::move(settings)),
      router_(router),
      schemas_(schemas),
      publisher_(publisher),
      store_(store),
      progress_(std::move(progress)),
      exported_(std::move(exported_snapshot)),
      done_(std::move(done)),
      progress_timer_(executor_),
      save_timer_(executor_) {
  tables_.resize(progress_.tables.size());
  for (std::size_t i = 0; i < tables_.size(); ++i) {
    tables_[i].progress = &progress_.tables[i];
    if (progress_.tables[i].last_key) {
      tables_[i].next_after = *progress_.tables[i].last_key;
      tables_[i].have_next_after = true;
    }
    tables_[i].chunks = sink::UnitTracker<Chunk>(progress_.tables[i].chunks);
  }
  for (const auto& t : progress_.tables) {
    if (t.rows > 0) any_published_ = true;
  }
}

Snapshotter::~Snapshotter() {
  stop();
}

void Snapshotter::stop() {
  if (save_pending_) write_progress();
  save_timer_.cancel();
  stopped_ = true;
  progress_timer_.cancel();
  for (auto& w : workers_) {
    if (w.conn) w.conn->close();
  }
}

void Snapshotter::fail(SnapshotFailure kind, const std::string& reason, bool lacks_select) {
  if (stopped_) return;
  failure_lacks_select_ = lacks_select;
  stop();
  // Deferred: the caller may destroy this object from the callback.
  asio::post(executor_, [done = done_, kind, reason] { done(kind, reason); });
}

void Snapshotter::fail_read(const Worker& w, const std::string& table, const std::string& message) {
  const std::string& sqlstate = w.conn->last_sqlstate();
  const std::string hint = row_security_hint(sqlstate, message);
  fail(SnapshotFailure::kRetry, "snapshot of " + table + " failed: " + message + hint,
       sqlstate == pg::sqlstate::kInsufficientPrivilege && hint.empty());
}

void Snapshotter::start() {
  std::size_t pending = 0;
  for (const auto& t : progress_.tables) pending += t.done ? 0 : 1;
  spdlog::info(
      "snapshot: {} of {} tables to read{} (chunks of {} rows, {} connection(s))", pending,
      progress_.tables.size(),
      exported_.empty() ? " at their current state, resuming after a restart"
                        : " from the slot's exported snapshot at " + progress_.lsn.to_string(),
      settings_.chunk_size, std::min(settings_.parallelism, std::max<std::size_t>(pending, 1)));
  const std::size_t n = std::min(settings_.parallelism, std::max<std::size_t>(pending, 1));
  workers_.resize(n);
  for (auto& w : workers_) {
    if (!open_worker(w)) return;
  }
  rate_ = RateMeter();  // rows/s from here
  schedule_progress_log();
  for (auto& w : workers_) next_table(w);
  check_done();
}

bool Snapshotter::open_worker(Worker& w) {
  w.conn = std::make_unique<SnapshotConnection>(executor_, settings_.conninfo,
                                                settings_.application_name);
  if (auto c = w.conn->connect(read_every_row_options(settings_.row_security)); !c) {
    fail(SnapshotFailure::kRetry, c.error());
    return false;
  }
  if (!exported_.empty() && snapshot_time_.count() == 0) {
    // The snapshot's horizon (source.txId) and its time (source.ts_ms of every row read on it:
    // Debezium's PostgreSQL snapshot reads CURRENT_TIMESTAMP in its snapshot transaction once,
    // RelationalSnapshotChangeEventSource#getSnapshotSourceTimestamp).
    if (!begin_read(w)) return false;
    if (auto r = w.conn->exec("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, "
                              "(extract(epoch FROM now()) * 1000000)::bigint");
        r && PQntuples(r->get()) == 1) {
      if (progress_.xid == 0)
        progress_.xid = std::strtoull(PQgetvalue(r->get(), 0, 0), nullptr, 10);
      snapshot_time_ =
          std::chrono::microseconds(std::strtoll(PQgetvalue(r->get(), 0, 1), nullptr, 10));
    }
    end_read(w);
  }
  return true;
}

bool Snapshotter::begin_read(Worker& w) {
  if (w.in_txn) return true;
  // Every read sees the slot's consistent point (PostgreSQL docs §9.27.5); each chunk is its own
  // transaction, so the table locks it takes (ACCESS SHARE) last one chunk, not the snapshot:
  // DDL on a table that was read is not blocked for the rest of the snapshot.
  std::vector<std::string> sql = {"BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"};
  if (!exported_.empty() && (w.table == nullptr || !w.table->current_state)) {
    sql.push_back("SET TRANSACTION SNAPSHOT " + pg::quote_literal(exported_));
  }
  for (const auto& statement : sql) {
    if (auto r = w.conn->exec(statement); !r) {
      fail(SnapshotFailure::kRetry, "cannot start a snapshot read: " + r.error());
      return false;
    }
  }
  w.in_txn = true;
  return true;
}

bool Snapshotter::rewritten_since_export(Worker& w, const Table& t) {
  auto same = w.conn->exec(same_file_query(t.plan));
  return same && PQntuples(same->get()) == 1 &&
         std::string_view(PQgetvalue(same->get(), 0, 0)) == "f";
}

bool Snapshotter::read_at_current_state(Worker& w, Table& t, std::string_view why) {
  spdlog::warn(
      "snapshot: {}.{} was rewritten after the slot's consistent point ({}): its rows after {} "
      "are read at their current state",
      t.progress->schema, t.progress->table, why,
      t.progress->rows > 0 ? std::to_string(t.progress->rows) + " rows" : "none");
  end_read(w);
  t.current_state = true;
  return begin_read(w);
}

void Snapshotter::end_read(Worker& w) {
  if (!w.in_txn || !w.conn) return;
  (void)w.conn->exec("COMMIT");
  w.in_txn = false;
}

void Snapshotter::next_table(Worker& w) {
  while (!stopped_) {
    Table* pick = nullptr;
    for (auto& t : tables_) {
      if (!t.assigned && !t.progress->done) {
        pick = &t;
        break;
      }
    }
    if (pick == nullptr) {
      w.table = nullptr;
      end_read(w);
      return;
    }
    pick->assigned = true;
    w.table = pick;
    if (prepare_table(w, *pick)) {
      read_chunk(w);
      return;
    }
    if (stopped_) return;
  }
}

bool Snapshotter::prepare_table(Worker& w, Table& t) {
  TableProgress& p = *t.progress;
  // The cached shape: a refresh would invalidate the router's pointer to it.
  // The table's current shape (columns added since start-up included); the catalog keeps the
  // pointers it handed out valid.
  const router::TableSchema* shape = schemas_.table(p.schema, p.table, /*refresh=*/true);
  if (shape == nullptr) {
    spdlog::warn("snapshot: table {}.{} no longer exists; skipping it", p.schema, p.table);
    p.done = true;
    t.read_complete = true;
    save_progress(/*now=*/true);
    return false;
  }
  // Pagination key: the primary key (unique by definition), else the table's configured or
  // replica-identity key columns.
  auto plan = make_read_plan(*shape, router_.key_columns_of(p.schema, p.table));
  if (!plan) {
    fail(SnapshotFailure::kMapping,
         "snapshot: key columns of " + p.schema + "." + p.table + " are not all columns of it");
    return false;
  }
  t.plan = std::move(*plan);
  t.started = std::chrono::steady_clock::now();
  if (auto r = w.conn->exec("SELECT reltuples FROM pg_catalog.pg_class WHERE oid = to_regclass(" +
                            pg::quote_literal(qualified(p.schema, p.table)) + ")");
      r && PQntuples(r->get()) == 1) {
    const double reltuples = std::strtod(PQgetvalue(r->get(), 0, 0), nullptr);
    t.estimated = reltuples >= 0;  // -1 until the table is first vacuumed or analysed
    t.estimated_rows = std::max(0.0, reltuples);
  }
  if (t.plan.key.empty()) {
    spdlog::warn(
        "snapshot: table {}.{} has no key (no primary key or unique index on NOT NULL "
        "columns): reading it whole in one pass (not resumable; add such a key to read it in "
        "chunks)",
        p.schema, p.table);
    if (p.rows > 0) {
      spdlog::warn("snapshot: {}.{} was partly read before a restart: reading it again", p.schema,
                   p.table);
    }
    // A cursor lives in one transaction: the whole table is read in it. A table rewritten since
    // the consistent point cannot be handed over without a key: it is read at its current state,
    // as after a restart (the stream from the consistent point follows).
    if (!begin_read(w)) return false;
    if (!exported_.empty() && rewritten_since_export(w, t) &&
        !read_at_current_state(w, t, "it has no key")) {
      return false;
    }
    if (auto r = w.conn->exec("DECLARE walrelay_snapshot NO SCROLL CURSOR FOR " + t.plan.select);
        !r) {
      if (is_dropped_table(w.conn->last_sqlstate())) {
        spdlog::warn("snapshot: table {}.{} no longer exists; skipping it", p.schema, p.table);
        p.done = true;
        t.read_complete = true;
        save_progress(/*now=*/true);
        return false;
      }
      fail_read(w, p.schema + "." + p.table, r.error());
      return false;
    }
    w.cursor = true;
  }
  spdlog::info("snapshot: reading {}.{} ({}{}{})", p.schema, p.table,
               t.estimated ? fmt::format("about {:.0f} rows", t.estimated_rows)
                           : std::string("row count not estimated before ANALYZE"),
               t.plan.key.empty() ? "" : ", in key order",
               t.have_next_after ? ", resuming after " + std::to_string(p.rows) + " rows" : "");
  return true;
}

void Snapshotter::read_chunk(Worker& w) {
  if (stopped_ || reading_stopped_ || w.table == nullptr || w.waiting) return;
  if (!has_room()) return;  // maybe_continue reads it when acknowledgements free room
  Table& t = *w.table;
  w.waiting = true;
  Worker* wp = &w;
  if (w.cursor) {
    w.conn->async_query(
        "FETCH FORWARD " + std::to_string(settings_.chunk_size) + " FROM walrelay_snapshot", {}, {},
        [this, wp, alive = std::weak_ptr<int>(alive_)](std::expected<ResultPtr, std::string> r) {
          if (alive.expired() || stopped_) return;
          wp->waiting = false;
          on_read(*wp, std::move(r));
        });
    return;
  }
  // A keyset chunk is its own transaction, sent as one batch (one round trip, nothing waited
  // for on the event loop): BEGIN; on the exported snapshot also SET TRANSACTION SNAPSHOT and
  // whether the table was rewritten since; the chunk's SELECT; COMMIT.
  const bool on_export = !exported_.empty() && !t.current_state;
  std::string batch = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; ";
  if (on_export) {
    batch += "SET TRANSACTION SNAPSHOT " + pg::quote_literal(exported_) + "; " +
             same_file_query(t.plan) + "; ";
  }
  batch += chunk_query_literal(t.plan, t.have_next_after ? &t.next_after : nullptr,
                               settings_.chunk_size + 1) +
           "; COMMIT";
  w.conn->async_batch(batch, [this, wp, on_export, alive = std::weak_ptr<int>(alive_)](
                                 std::expected<std::vector<ResultPtr>, std::string> r) {
    if (alive.expired() || stopped_) return;
    wp->waiting = false;
    if (!r) {
      on_read(*wp, std::unexpected(std::move(r.error())));
      return;
    }
    const std::size_t select = on_export ? 3 : 1;  // BEGIN, [SET, same file,] SELECT, COMMIT
    if (r->size() != select + 2) {
      on_read(*wp, std::unexpected("unexpected results of a chunk's batch (" +
                                   std::to_string(r->size()) + ")"));
      return;
    }
    const PGresult* same = (*r)[2].get();
    if (on_export && PQntuples(same) == 1 && std::string_view(PQgetvalue(same, 0, 0)) == "f") {
      // Rewritten since the export: the chunk's rows are not the table's. A read ahead is
      // dropped: the read after the current chunk is published sees it again.
      if (!wp->result) on_rewritten(*wp);
      return;
    }
    on_read(*wp, std::move((*r)[select]));
  });
}

void Snapshotter::on_read(Worker& w, std::expected<ResultPtr, std::string> r) {
  if (w.result) {  // the current chunk is still being published: this is the next one
    w.prefetched = std::move(r);
    // A cursor chunk's last row waits for this look-ahead to know its marker.
    if (w.cursor && w.next_row + 1 == PQntuples(w.result.get())) publish_rows(w);
    return;
  }
  on_chunk(w, std::move(r));
}

void Snapshotter::on_rewritten(Worker& w) {
  Table& t = *w.table;
  if (!hand_over_) {
    spdlog::warn(
        "snapshot: {}.{} was rewritten after the slot's consistent point (snapshot.mode "
        "initial_only has no stream to finish it): its rows after {} are read at their current "
        "state",
        t.progress->schema, t.progress->table,
        t.progress->rows > 0 ? std::to_string(t.progress->rows) + " rows" : "none");
    t.current_state = true;
    read_chunk(w);
    return;
  }
  spdlog::warn(
      "snapshot: {}.{} was rewritten after the slot's consistent point; its rows after {} are "
      "read by an incremental snapshot while streaming",
      t.progress->schema, t.progress->table,
      t.progress->rows > 0 ? std::to_string(t.progress->rows) + " rows" : "none");
  // From the rows handed to the producer, acknowledged or not: the snapshot completes only once
  // they are acknowledged, and until then a restart hands the table over again from its
  // acknowledged (exactly_once: committed) position.
  if (!hand_over_(produced().tables[static_cast<std::size_t>(&t - tables_.data())])) {
    fail(SnapshotFailure::kRetry, "cannot queue the incremental snapshot of " + t.progress->schema +
                                      "." + t.progress->table);
    return;
  }
  finish_table_read(w);
}

void Snapshotter::consume_prefetched(Worker& w) {
  Worker* wp = &w;
  boost::asio::post(executor_, [this, wp, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired() || stopped_ || !wp->prefetched || wp->result) return;
    auto r = std::move(*wp->prefetched);
    wp->prefetched.reset();
    on_chunk(*wp, std::move(r));
  });
}

void Snapshotter::on_chunk(Worker& w, std::expected<ResultPtr, std::string> result) {
  Table& t = *w.table;
  const TableProgress& p = *t.progress;
  if (!result) {
    if (is_changed_columns(w.conn->last_sqlstate()) && !w.cursor && ++t.shape_refreshes <= 3) {
      // A column was dropped or renamed: read the table's shape again and repeat the chunk.
      const router::TableSchema* shape = schemas_.table(p.schema, p.table, /*refresh=*/true);
      auto plan = shape != nullptr
                      ? make_read_plan(*shape, router_.key_columns_of(p.schema, p.table))
                      : std::nullopt;
      if (plan && plan->key == t.plan.key) {
        spdlog::warn(
            "snapshot: the columns of {}.{} changed while it was read ({}); reading the "
            "chunk again with its new shape",
            p.schema, p.table, result.error());
        t.plan = std::move(*plan);
        read_chunk(w);
        return;
      }
    }
    if (is_dropped_table(w.conn->last_sqlstate())) {
      spdlog::warn(
          "snapshot: table {}.{} was dropped while it was read ({}); its rows published so far "
          "stay, and nothing more of it is read (if it was renamed and `tables` captures its new "
          "name, that table is read by an incremental snapshot at the next start, "
          "snapshot.new_tables)",
          p.schema, p.table, result.error());
      w.cursor = false;
      w.result.reset();
      finish_table_read(w);
      return;
    }
    if (is_untranslatable(w.conn->last_sqlstate())) {
      // A value of the database's encoding without a UTF-8 equivalent: every retry would fail
      // the same way, so it stops like a row that cannot be mapped (the stream would report
      // the same value as a mapping error).
      fail(SnapshotFailure::kMapping, "snapshot of " + p.schema + "." + p.table +
                                          ": a value cannot be converted to UTF-8 (" +
                                          result.error() + "); fix the value in the database");
      return;
    }
    fail_read(w, p.schema + "." + p.table, result.error());
    return;
  }
  // A chunk with rows: the previous chunk's last row, held back in case it was the table's last,
  // is now an ordinary row.
  w.result = std::move(*result);
  // Rows read on the exported snapshot carry its time; a table read in its current state (no
  // exported snapshot, or rewritten since the export) the time its chunk was read.
  w.read_time = snapshot_time_.count() != 0 && !w.table->current_state ? snapshot_time_ : now_us();
  w.next_row = 0;
  const int rows = PQntuples(w.result.get());
  if (rows > 0) (void)t.chunks.open(Chunk{});
  if (!w.cursor && rows > static_cast<int>(settings_.chunk_size) && !t.plan.key.empty()) {
    // Another chunk follows: ask for it now, after this chunk's last key.
    row_values(w.result.get(), static_cast<int>(settings_.chunk_size) - 1);
    t.next_after = key_of(t.plan, values_);
    t.have_next_after = true;
    read_chunk(w);  // a read ahead
    if (stopped_) return;
  } else if (w.cursor && rows == static_cast<int>(settings_.chunk_size)) {
    // A full cursor chunk: the next FETCH tells whether this chunk's last row is the table's.
    read_chunk(w);  // a read ahead
    if (stopped_) return;
  }
  publish_rows(w);
}

void Snapshotter::publish_rows(Worker& w) {
  Table& t = *w.table;
  // Keyset chunks ask for one row more than they publish: it tells whether another chunk
  // follows, so the table's last row gets its marker. A full cursor chunk's last row waits for
  // the next FETCH (asked for in on_chunk): none (an empty result) makes it the table's last.
  const int fetched = PQntuples(w.result.get());
  const int rows = std::min(fetched, static_cast<int>(settings_.chunk_size));
  bool last_chunk = fetched <= static_cast<int>(settings_.chunk_size);
  int publishable = rows;
  if (w.cursor && fetched == static_cast<int>(settings_.chunk_size)) {
    if (!w.prefetched) {
      last_chunk = false;
      publishable = rows - 1;  // the look-ahead's handler publishes the last row
      if (stopped_) return;
      read_chunk(w);  // the read ahead, unless asked for already (or no room yet: retried)
      if (stopped_) return;
    } else {
      last_chunk = *w.prefetched && PQntuples(w.prefetched->value().get()) == 0;
      if (last_chunk) w.prefetched.reset();  // the empty look-ahead: nothing more to read
    }
  } else if (w.cursor) {
    last_chunk = true;  // fewer rows than asked for: the cursor is at its end
  }
  while (w.next_row < publishable) {
    if (reading_stopped_) return;
    const int row = w.next_row;
    const bool table_first = t.progress->rows == 0 && t.rows_published == 0;
    const bool table_last = last_chunk && row == rows - 1;
    bool snapshot_last = false;
    if (table_last) {
      snapshot_last = std::all_of(tables_.begin(), tables_.end(), [&](const Table& o) {
        return &o == &t || o.read_complete || o.progress->done;
      });
    }
    std::string_view marker = "true";
    if (snapshot_last) {
      marker = "last";
    } else if (!any_published_) {
      marker = "first";
    } else if (table_last) {
      marker = "last_in_data_collection";
    } else if (table_first) {
      marker = "first_in_data_collection";
    }
    if (!publish_row(w, row, marker)) return;  // paused (queue full) or failed
    any_published_ = true;
    ++t.rows_published;
    ++w.next_row;
  }
  if (w.next_row < rows) return;  // waiting for the look-ahead
  if (rows > 0) {
    Chunk& c = *t.chunks.back();
    c.rows = static_cast<std::uint64_t>(rows);
    t.chunks.close(t.chunks.next_seq() - 1);
    // The chunk's last key: where the next chunk starts, and what is saved once it is acked.
    row_values(w.result.get(), rows - 1);
    KeyText last = key_of(t.plan, values_);
    c.last_key = last;
    t.next_after = std::move(last);
    t.have_next_after = !t.plan.key.empty();
  }
  w.result.reset();
  if (last_chunk) {
    finish_table_read(w);
  } else if (w.prefetched) {
    consume_prefetched(w);
  } else {
    read_chunk(w);  // unless the prefetch is still outstanding: its handler continues
  }
  advance(t);
}

void Snapshotter::check_done() {
  if (stopped_) return;
  for (const auto& t : tables_) {
    if (!t.progress->done) return;
  }
  for (auto& w : workers_) {
    end_read(w);
  }
  std::uint64_t rows = 0;
  for (const auto& t : progress_.tables) rows += t.rows;
  spdlog::info("snapshot: complete, {} rows of {} tables acknowledged by Kafka", rows,
               progress_.tables.size());
  stop();
  asio::post(executor_, [done = done_] { done(std::nullopt, ""); });
}

void Snapshotter::save_progress(bool now) {
  // Every acknowledged chunk moves the progress; an fsync per chunk held the event loop for
  // ~0.25 s of a 1M-row snapshot's ~1.8 s.
  const auto due = last_save_ + kSaveInterval;
  if (!now && std::chrono::steady_clock::now() < due) {
    if (!save_pending_) {
      save_pending_ = true;
      save_timer_.expires_at(due);
      save_timer_.async_wait(
          [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
            if (!ec && !alive.expired() && save_pending_) write_progress();
          });
    }
    return;
  }
  write_progress();
}

void Snapshotter::write_progress() {
  save_pending_ = false;
  last_save_ = std::chrono::steady_clock::now();
  if (auto saved = store_.save(progress_); !saved) {
    spdlog::warn("snapshot: cannot save progress: {}", saved.error());
  }
}

void Snapshotter::schedule_progress_log() {
  progress_timer_.expires_after(settings_.progress_interval);
  progress_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    rate_.tick(rows_total_);
    spdlog::info("snapshot progress: {}", figures().summary());
    schedule_progress_log();
  });
}

SnapshotFigures Snapshotter::figures() const {
  SnapshotFigures f;
  f.kind = "initial";
  f.rows_per_second = rate_.rate();
  for (const auto& t : tables_) {
    f.tables.push_back(TableFigures{t.progress->schema + "." + t.progress->table, t.progress->rows,
                                    t.estimated_rows, t.progress->done});
  }
  return f;
}

}  // namespace walrelay::snapshot
