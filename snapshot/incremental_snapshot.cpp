#include "walrelay/snapshot/incremental_snapshot.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "walrelay/core/headers.hpp"
#include "walrelay/pg/async_connection.hpp"
#include "walrelay/pg/error.hpp"
#include "walrelay/pg/notices.hpp"
#include "walrelay/pg/replication_stream.hpp"
#include "walrelay/pg/wire.hpp"

namespace walrelay::snapshot {

namespace asio = boost::asio;

namespace {

std::chrono::microseconds now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
}

std::string window_key(std::string_view topic, std::string_view key) {
  std::string k(topic);
  k.push_back('\0');
  k.append(key);
  return k;
}

}  // namespace

IncrementalSnapshot::IncrementalSnapshot(asio::any_io_executor executor, Settings settings,
                                         router::EventRouter& router,
                                         router::SchemaProvider& schemas, ShapeReader read_shape,
                                         SnapshotProgressStore& store, SnapshotProgress progress)
    : executor_(std::move(executor)),
      settings_(std::move(settings)),
      router_(router),
      schemas_(schemas),
      store_(store),
      progress_(std::move(progress)),
      read_shape_(std::move(read_shape)),
      retry_timer_(executor_) {
  for (const auto& t : progress_.tables) {
    if (t.done) continue;
    if (!captured(t)) {
      // Taken out of `tables` since it was queued: its rows would not be published, yet it would
      // count as read. It stays queued (also in the position record) and resumes when put back.
      spdlog::warn(
          "incremental snapshot: {}.{} is no longer captured: not read now; put back in `tables`, "
          "it resumes after {} rows",
          t.schema, t.table, t.rows);
      continue;
    }
    spdlog::info("incremental snapshot: resuming {}.{} after {} rows", t.schema, t.table, t.rows);
  }
}

bool IncrementalSnapshot::captured(const TableProgress& t) const {
  return router_.role_of(t.schema, t.table) == router::TableRole::kRowChange;
}

IncrementalSnapshot::~IncrementalSnapshot() {
  retry_timer_.cancel();
  if (conn_) conn_->close();
}

bool IncrementalSnapshot::busy() const {
  return phase_ != Phase::kIdle || next_table().has_value();
}

void IncrementalSnapshot::write_watermark(const std::string& kind, std::function<void()> then) {
  pg::AsyncConnection* conn = connection();
  if (conn == nullptr) return;
  // A transactional logical message, committed on its own (autocommit): it enters the stream at
  // its commit, in commit order with every other transaction. Its message may reach the stream
  // before this write's answer does.
  conn->query_params("SELECT pg_logical_emit_message(true, " + pg::quote_literal(kWatermarkPrefix) +
                         ", " + pg::quote_literal(kind + ":" + chunk_id_) + ")",
                     {}, {},
                     [this, alive = std::weak_ptr<int>(alive_), id = chunk_id_, kind,
                      then = std::move(then)](pg::AsyncConnection::Result r) {
                       if (alive.expired() || !current(id)) return;
                       if (!r) {
                         retry_later("cannot write the " + kind + " watermark: " + r.error());
                         return;
                       }
                       then();
                     });
}

void IncrementalSnapshot::on_truncated(std::string_view topic) {
  if (phase_ != Phase::kIdle && topic == topic_) truncated_ = true;
}

bool IncrementalSnapshot::superseded(const std::string& key) const {
  if (truncated_ || window_keys_.contains(key)) return true;
  auto it = pre_window_keys_.find(key);
  if (it == pre_window_keys_.end()) return false;
  // Changed before the low watermark by a transaction the chunk's snapshot did not see: still
  // running for it (in xip) or started after it (xid >= xmax).
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](std::uint32_t xid) { return !seen_by_snapshot(xid); });
}

bool IncrementalSnapshot::seen_by_snapshot(std::uint32_t xid) const {
  if (static_cast<std::int32_t>(xid - snap_xmax_) >= 0) return false;
  return std::find(snap_xip_.begin(), snap_xip_.end(), xid) == snap_xip_.end();
}

void IncrementalSnapshot::bound_window() {
  const std::size_t held = window_keys_.size() + pre_window_keys_.size();
  if (held <= settings_.max_window_keys) return;
  const TableProgress& t = progress_.tables[table_];
  // Nothing of the chunk was published: reading it again (under new watermarks) loses nothing.
  abandon_chunk();
  retry_later("the chunk of " + t.schema + "." + t.table + " would keep more than " +
              std::to_string(settings_.max_window_keys) +
              " streamed keys (snapshot.max_window_keys) until its high watermark; it is read "
              "again");
}

void IncrementalSnapshot::sample_rate() {
  std::uint64_t rows = 0;
  for (const auto& p : progress_.tables) rows += p.rows;
  rate_.tick(rows);
}

std::string IncrementalSnapshot::status() const {
  const auto next = next_table();
  if (!next) return "";
  std::size_t queued = 0;
  for (const auto& t : progress_.tables) queued += t.done ? 0 : 1;
  const TableProgress& t = progress_.tables[phase_ != Phase::kIdle ? table_ : *next];
  return "incremental snapshot of " + t.schema + "." + t.table + " at chunk " +
         std::to_string(t.chunks) + " (chunks of " + std::to_string(settings_.chunk_size) +
         " rows; " + std::to_string(queued) + " table(s) to go): " + figures().summary();
}

SnapshotFigures IncrementalSnapshot::figures() const {
  SnapshotFigures f;
  f.kind = "incremental";
  f.rows_per_second = rate_.rate();
  for (const auto& t : progress_.tables) {
    const std::string name = t.schema + "." + t.table;
    const auto e = estimates_.find(name);
    f.tables.push_back(TableFigures{name, t.rows, e != estimates_.end() ? e->second : 0, t.done});
  }
  return f;
}

std::optional<std::size_t> IncrementalSnapshot::next_table() const {
  for (std::size_t i = 0; i < progress_.tables.size(); ++i) {
    if (!progress_.tables[i].done && captured(progress_.tables[i])) return i;
  }
  return std::nullopt;
}

std::vector<std::string> IncrementalSnapshot::execute(
    const std::vector<std::pair<std::string, std::string>>& tables) {
  std::vector<std::string> refused;
  for (const auto& [schema, table] : tables) {
    const std::string name = schema + "." + table;
    if (router_.role_of(schema, table) != router::TableRole::kRowChange) {
      refused.push_back(name +
                        ": not a captured row-change table (check `tables`, `exclude`; outbox "
                        "tables are never snapshotted)");
      continue;
    }
    const router::TableSchema* shape = schemas_.table(schema, table, /*refresh=*/false);
    if (shape == nullptr) {
      refused.push_back(name + ": no such table");
      continue;
    }
    auto plan = make_read_plan(*shape, router_.key_columns_of(schema, table));
    if (!plan || plan->key.empty()) {
      refused.push_back(name +
                        ": has no primary key or unique index on NOT NULL columns, so it cannot "
                        "be read in chunks while streaming; add one (its columns may also be set "
                        "as `key_columns`)");
      continue;
    }
    auto it = std::find_if(
        progress_.tables.begin(), progress_.tables.end(),
        [&](const TableProgress& t) { return t.schema == schema && t.table == table; });
    if (it == progress_.tables.end()) {
      progress_.tables.push_back(table_progress(schema, table));
    } else {
      // Starts over, also while one of its chunks is in flight: that chunk is dropped.
      const auto i = static_cast<std::size_t>(it - progress_.tables.begin());
      if (phase_ != Phase::kIdle && table_ == i) abandon_chunk();
      *it = table_progress(schema, table);
      forget_pending(i);
    }
    persist([&](TableProgress& d) { d = table_progress(schema, table); }, schema, table);
    spdlog::info("incremental snapshot of {} queued", name);
  }
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) kick();
  });
  return refused;
}

void IncrementalSnapshot::stop(const std::vector<std::pair<std::string, std::string>>& tables) {
  for (std::size_t i = 0; i < progress_.tables.size(); ++i) {
    auto& t = progress_.tables[i];
    const bool listed = tables.empty() || std::any_of(tables.begin(), tables.end(), [&](auto& p) {
                          return p.first == t.schema && p.second == t.table;
                        });
    if (!listed || t.done) continue;
    t.done = true;
    forget_pending(i);
    persist([](TableProgress& d) { d.done = true; }, t.schema, t.table);
    spdlog::info("incremental snapshot of {}.{} stopped after {} rows", t.schema, t.table, t.rows);
    if (phase_ != Phase::kIdle && table_ == i) abandon_chunk();
  }
  blocked_.clear();  // a table still denied says so again at its next read
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) kick();
  });
}

void IncrementalSnapshot::abandon_chunk() {
  // The chunk in flight is dropped: its watermarks are ignored when they arrive, and the answers
  // of its queries (current() is false for them).
  if (phase_ == Phase::kReading && conn_) {
    conn_->close();  // ends its transaction, and a SELECT waiting on a lock
    conn_.reset();
  }
  phase_ = Phase::kIdle;
  window_open_ = false;
  chunk_id_.clear();
  rows_.clear();
  release_window();
}

void IncrementalSnapshot::release_window() {
  // Swapped out rather than cleared: a window that held many keys gives its buckets back too.
  std::unordered_set<std::string>().swap(window_keys_);
  std::unordered_map<std::string, std::vector<std::uint32_t>>().swap(pre_window_keys_);
}

void IncrementalSnapshot::forget_pending(std::size_t table) {
  // Chunks of an earlier run of this table must not move the new run's position.
  std::erase_if(pending_, [&](const Pending& p) { return p.table == table; });
}

void IncrementalSnapshot::persist(const std::function<void(TableProgress&)>& change,
                                  const std::string& schema, const std::string& table) {
  SnapshotProgress durable;
  if (auto loaded = store_.load(); loaded && *loaded) durable = std::move(**loaded);
  durable.slot = progress_.slot;
  auto it = std::find_if(durable.tables.begin(), durable.tables.end(),
                         [&](auto& d) { return d.schema == schema && d.table == table; });
  if (it == durable.tables.end()) {
    durable.tables.push_back(table_progress(schema, table));
    it = durable.tables.end() - 1;
  }
  change(*it);
  if (auto saved = store_.save(durable); !saved) {
    spdlog::warn("incremental snapshot: cannot save progress: {}", saved.error());
  }
}

pg::AsyncConnection* IncrementalSnapshot::connection() {
  if (conn_) return conn_.get();
  // The settings the replication connection pins, so value texts equal wal2json's.
  auto options = pg::pinned_startup_options(settings_.conninfo);
  if (!options) {
    retry_later(options.error());
    return nullptr;
  }
  conn_ = std::make_unique<pg::AsyncConnection>(executor_, settings_.conninfo,
                                                settings_.application_name);
  conn_->set_startup_options(std::move(*options) + read_every_row_options(settings_.row_security));
  return conn_.get();
}

void IncrementalSnapshot::retry_later(const std::string& why, bool quiet) {
  spdlog::log(quiet ? spdlog::level::debug : spdlog::level::warn,
              "incremental snapshot: {}; retrying in 1 s", why);
  if (conn_) conn_->close();
  conn_.reset();
  phase_ = Phase::kIdle;
  window_open_ = false;
  chunk_id_.clear();
  release_window();
  retry_timer_.expires_after(std::chrono::seconds(1));
  retry_timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](auto ec) {
    if (!ec && !alive.expired()) kick();
  });
}

void IncrementalSnapshot::kick() {
  if (phase_ == Phase::kIdle && next_table()) start_chunk();
}

void IncrementalSnapshot::start_chunk() {
  table_ = *next_table();
  TableProgress& t = progress_.tables[table_];
  if (chunk_id_prefix_.empty()) {
    // The slot first: watermarks are database-wide, and a walrelay of another slot on the
    // database (whose pid and start time may be the same: containers run walrelay as pid 1) must
    // never match one of this one's chunks.
    chunk_id_prefix_ = progress_.slot + "-" + std::to_string(::getpid()) + "-" +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()) +
                       "-";
  }
  chunk_id_ = chunk_id_prefix_ + std::to_string(++chunk_counter_);
  phase_ = Phase::kPreparing;
  topic_ = router_.topic_of(t.schema, t.table);
  window_open_ = false;
  window_keys_.clear();
  pre_window_keys_.clear();
  snapshot_known_ = false;
  truncated_ = false;
  rows_.clear();
  // The table's current shape, read again for every chunk: columns added since the last chunk
  // are read too (the catalog returns the same shape when nothing changed).
  read_shape_(
      t.schema, t.table,
      [this, alive = std::weak_ptr<int>(alive_), id = chunk_id_](const router::TableSchema* shape) {
        if (!alive.expired() && current(id) && phase_ == Phase::kPreparing) {
          on_shape(shape);
        }
      });
}

void IncrementalSnapshot::on_shape(const router::TableSchema* shape) {
  TableProgress& t = progress_.tables[table_];
  auto plan = shape != nullptr ? make_read_plan(*shape, router_.key_columns_of(t.schema, t.table))
                               : std::nullopt;
  if (!plan || plan->key.empty()) {
    spdlog::warn("incremental snapshot: {}.{} no longer exists or has no key; skipping it",
                 t.schema, t.table);
    t.done = true;
    phase_ = Phase::kIdle;
    chunk_id_.clear();
    persist([](TableProgress& d) { d.done = true; }, t.schema, t.table);
    kick();
    return;
  }
  plan_ = std::move(*plan);
  if (t.chunks == 0) superseded_ = 0;
  if (t.rows == 0 && !t.last_key)
    spdlog::info("incremental snapshot: reading {}.{}", t.schema, t.table);
  // 1. The low watermark, committed before the chunk's SELECT starts. Keys streamed from here on
  // are collected (before the low watermark's message: with their transactions).
  phase_ = Phase::kReading;
  write_watermark("low", [this] { read_chunk(); });
}

void IncrementalSnapshot::read_chunk() {
  pg::AsyncConnection* conn = connection();
  if (conn == nullptr) return;
  // 2. The chunk in a REPEATABLE READ transaction whose snapshot is read back after it. Each
  // statement is sent once the one before succeeded: a reconnect between them would run the rest
  // outside the transaction.
  conn->query(
      "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", {},
      [this, alive = std::weak_ptr<int>(alive_), id = chunk_id_](pg::AsyncConnection::Result b) {
        if (alive.expired() || !current(id)) return;
        if (!b) {
          retry_later("cannot start the chunk's transaction: " + b.error());
          return;
        }
        const TableProgress& t = progress_.tables[table_];
        std::vector<std::optional<std::string>> params;
        std::vector<unsigned int> types;
        if (t.last_key) {
          params = *t.last_key;
          types = plan_.key_types;
        }
        conn_->query_params(chunk_query(plan_, t.last_key.has_value(), settings_.chunk_size),
                            std::move(params), std::move(types),
                            [this, alive, id](pg::AsyncConnection::Result r) {
                              if (!alive.expired() && current(id) && phase_ == Phase::kReading) {
                                on_rows(std::move(r));
                              }
                            });
      });
}

void IncrementalSnapshot::on_rows(pg::AsyncConnection::Result result) {
  if (!result) {
    const std::string sqlstate = conn_->last_sqlstate();
    conn_->query("ROLLBACK", {}, [](const pg::AsyncConnection::Result&) {});
    TableProgress& t = progress_.tables[table_];
    if (is_changed_columns(sqlstate)) {
      // A column was dropped or renamed: the next chunk is planned on the table's new shape
      // (each chunk reads it again).
      spdlog::warn(
          "incremental snapshot: the columns of {}.{} changed ({}); reading its shape "
          "again",
          t.schema, t.table, result.error());
      retry_later("chunk of " + t.schema + "." + t.table + " is read again");
      return;
    }
    if (is_dropped_table(sqlstate)) {
      spdlog::warn("incremental snapshot: {}.{} was dropped ({}); nothing more of it is read",
                   t.schema, t.table, result.error());
      t.done = true;
      phase_ = Phase::kIdle;
      chunk_id_.clear();
      persist([](TableProgress& d) { d.done = true; }, t.schema, t.table);
      kick();
      return;
    }
    if (sqlstate == "42501") {
      // No SELECT privilege: retried every second (a GRANT fixes it without a restart), said
      // once as an error naming the fix, and /ready says so meanwhile (blocked()).
      const std::string relation = pg::quote_ident(t.schema) + "." + pg::quote_ident(t.table);
      std::string why = "cannot read " + t.schema + "." + t.table + ": " + result.error() +
                        ". Run GRANT SELECT ON " + relation +
                        " TO the role of source.conninfo; retrying every second";
      const bool first = blocked_.empty();
      if (first) spdlog::error("incremental snapshot: {}", why);
      blocked_ = std::move(why);
      retry_later("chunk of " + t.schema + "." + t.table + " failed: " + result.error(), true);
      return;
    }
    retry_later("chunk of " + t.schema + "." + t.table + " failed: " + result.error() +
                row_security_hint(sqlstate, result.error()));
    return;
  }
  if (!blocked_.empty()) {
    spdlog::info("incremental snapshot: {}.{} can be read again", progress_.tables[table_].schema,
                 progress_.tables[table_].table);
    blocked_.clear();
  }
  rows_ = std::move(*result);
  last_chunk_ = rows_.size() < settings_.chunk_size;
  // The snapshot the SELECT used: which transactions it saw (PostgreSQL docs §9.27.5,
  // pg_current_snapshot: xmin:xmax:xip_list).
  // With the table's size estimate for the progress figures (pg_class.reltuples, -1 when never
  // analysed).
  const TableProgress& t = progress_.tables[table_];
  conn_->query(
      "SELECT pg_current_snapshot()::text, (SELECT reltuples FROM pg_catalog.pg_class WHERE oid = "
      "to_regclass($1))::text",
      {pg::quote_ident(t.schema) + "." + pg::quote_ident(t.table)},
      [this, alive = std::weak_ptr<int>(alive_), id = chunk_id_](pg::AsyncConnection::Result snap) {
        if (!alive.expired() && current(id) && phase_ == Phase::kReading) {
          on_snapshot(std::move(snap));
        }
      });
}

void IncrementalSnapshot::on_snapshot(pg::AsyncConnection::Result snap) {
  if (!snap || snap->size() != 1 || snap->front().empty() || !snap->front()[0]) {
    retry_later("cannot read the chunk's snapshot" + (snap ? std::string() : ": " + snap.error()));
    return;
  }
  if (snap->front().size() > 1 && snap->front()[1]) {
    const TableProgress& t = progress_.tables[table_];
    estimates_[t.schema + "." + t.table] =
        std::max(0.0, std::strtod(snap->front()[1]->c_str(), nullptr));
  }
  {
    const std::string& text = *snap->front()[0];
    const auto c1 = text.find(':');
    const auto c2 = text.find(':', c1 + 1);
    snap_xmax_ = static_cast<std::uint32_t>(std::strtoull(text.c_str() + c1 + 1, nullptr, 10));
    snap_xip_.clear();
    for (std::size_t at = c2 + 1; at < text.size();) {
      const auto comma = text.find(',', at);
      snap_xip_.push_back(
          static_cast<std::uint32_t>(std::strtoull(text.c_str() + at, nullptr, 10)));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  // From here on only the keys of transactions the snapshot did not see are kept from before the
  // low watermark (the rest are older than the chunk's rows): while the stream drains a backlog,
  // that is none of the backlog's.
  snapshot_known_ = true;
  std::erase_if(pre_window_keys_, [&](const auto& entry) {
    return std::all_of(entry.second.begin(), entry.second.end(),
                       [&](std::uint32_t xid) { return seen_by_snapshot(xid); });
  });
  // Ends the chunk's transaction (its answer is not needed: the high watermark follows it on the
  // same connection, and a read-only transaction has nothing to commit).
  conn_->query("COMMIT", {}, [](const pg::AsyncConnection::Result&) {});
  // 3. The high watermark, committed after the SELECT's result is complete. Its message may
  // reach the stream before the write's answer: the chunk waits for it from now on.
  phase_ = Phase::kWaitingHigh;
  write_watermark("high", [] {});
}

void IncrementalSnapshot::on_streamed(std::span<const Record> records, std::uint64_t xid) {
  if (phase_ == Phase::kIdle) return;
  const auto xid32 = static_cast<std::uint32_t>(xid);
  bool kept = false;
  for (const Record& r : records) {
    if (!r.key || r.topic != topic_) continue;
    if (window_open_) {
      window_keys_.insert(window_key(r.topic, *r.key));
    } else if (!snapshot_known_ || !seen_by_snapshot(xid32)) {
      auto& xids = pre_window_keys_[window_key(r.topic, *r.key)];
      if (xids.empty() || xids.back() != xid32) xids.push_back(xid32);
    } else {
      continue;
    }
    kept = true;
  }
  if (kept) bound_window();
}

std::expected<std::span<const Record>, std::string> IncrementalSnapshot::on_watermark(
    std::string_view content, Lsn lsn, std::uint64_t xid, Lsn txn_next_lsn) {
  records_.clear();
  const auto colon = content.find(':');
  if (colon == std::string_view::npos || chunk_id_.empty() ||
      content.substr(colon + 1) != chunk_id_) {
    return std::span<const Record>();  // another chunk's (an earlier run's, or a stopped one)
  }
  if (content.substr(0, colon) == "low") {
    window_open_ = true;
    window_keys_.clear();
    return std::span<const Record>();
  }
  if (content.substr(0, colon) != "high" || phase_ != Phase::kWaitingHigh) {
    return std::span<const Record>();
  }
  // The chunk's rows that no streamed event of the window touched, as of the SELECT.
  window_open_ = false;
  TableProgress& t = progress_.tables[table_];
  owned_.clear();
  owned_.reserve(rows_.size());
  std::vector<std::optional<std::string_view>> values;
  // id: the high watermark's LSN, the table, the chunk and the row within it, in the initial
  // snapshot's shape (`<LSN>:r:<schema>.<table>:<chunk>:<row>`). The watermark's LSN is that of
  // this read alone: a chunk read again (by a later snapshot of the table, or after a restart) is
  // closed by another watermark, so its ids never repeat those of another read of other rows, and
  // the same read decoded again gives the same ids.
  const std::string id_prefix =
      lsn.to_string() + ":r:" + t.schema + "." + t.table + ":" + std::to_string(t.chunks) + ":";
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    values.clear();
    for (const auto& v : rows_[i]) {
      values.push_back(v ? std::optional<std::string_view>(*v) : std::nullopt);
    }
    if (auto built = build_row_change(plan_, values, decoder::NumericTokens::kStrings,
                                      settings_.check_utf8, lsn, xid, change_, tokens_);
        !built) {
      return std::unexpected("incremental snapshot of " + t.schema + "." + t.table + ": " +
                             built.error());
    }
    const std::string id = id_prefix + std::to_string(i);
    const router::SnapshotRead read{"incremental", id, now_us()};
    auto routed = router_.route_snapshot(change_, read);
    if (!routed) return std::unexpected("incremental snapshot: " + routed.error().reason);
    for (const Record& r : *routed) {
      if (r.key && superseded(window_key(r.topic, *r.key))) {
        ++superseded_;
        continue;
      }
      OwnedRecord o;
      o.topic = r.topic;
      o.has_key = r.key.has_value();
      if (r.key) o.key = *r.key;
      o.value = r.value.value_or("");
      o.id = id;
      o.ts = r.timestamp_ms;
      o.op = r.op;
      owned_.push_back(std::move(o));
    }
  }
  headers_.resize(owned_.size());
  for (std::size_t i = 0; i < owned_.size(); ++i) {
    const OwnedRecord& o = owned_[i];
    headers_[i] = {Header{header::kId, o.id}};
    records_.push_back(
        Record{o.topic, o.has_key ? std::optional<std::string_view>(o.key) : std::nullopt,
               std::string_view(o.value), std::span<const Header>(headers_[i]), o.ts, o.op});
  }
  Pending p;
  p.next_lsn = txn_next_lsn;
  p.table = table_;
  p.rows = rows_.size();
  p.done = last_chunk_;
  if (!rows_.empty()) {
    values.clear();
    for (const auto& v : rows_.back()) {
      values.push_back(v ? std::optional<std::string_view>(*v) : std::nullopt);
    }
    p.last_key = key_of(plan_, values);
  } else if (t.last_key) {
    p.last_key = *t.last_key;
  }
  // The next chunk starts after this one in memory; the durable position moves once Kafka has
  // this one (on_flushed).
  t.last_key = p.last_key.empty() && !t.last_key ? std::nullopt : std::optional(p.last_key);
  ++t.chunks;
  t.rows += p.rows;
  if (last_chunk_) {
    t.done = true;
    spdlog::info(
        "incremental snapshot: {}.{} read ({} chunks, {} rows superseded by streamed changes); "
        "done once Kafka has it",
        t.schema, t.table, t.chunks, superseded_);
    superseded_ = 0;
  }
  pending_.push_back(std::move(p));
  rows_.clear();
  chunk_id_.clear();
  phase_ = Phase::kIdle;
  asio::post(executor_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) kick();
  });
  return std::span<const Record>(records_);
}

void IncrementalSnapshot::on_flushed(Lsn flush) {
  while (!pending_.empty() && pending_.front().next_lsn <= flush) {
    const Pending p = pending_.front();
    pending_.pop_front();
    const TableProgress& live = progress_.tables[p.table];
    persist(
        [&](TableProgress& d) {
          if (!p.last_key.empty()) d.last_key = p.last_key;
          d.rows += p.rows;
          ++d.chunks;
          if (p.done) {
            d.done = true;
            spdlog::info("incremental snapshot: {}.{} done: {} rows", d.schema, d.table, d.rows);
          }
        },
        live.schema, live.table);
  }
}

}  // namespace walrelay::snapshot
