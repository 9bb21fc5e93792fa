// The Snapshotter's publishing half: rows of a read chunk become records (the router's snapshot
// mapping) handed to the shared Publisher, dead letters through the shared DeadLetterWriter,
// delivery reports acknowledge chunks in order (UnitTracker) and advance each table's progress,
// and the in-flight bound decides when the next chunk may be read. The reading half (workers,
// chunk queries, progress) is in snapshotter.cpp.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "walrelay/core/json.hpp"
#include "walrelay/snapshot/snapshotter.hpp"

namespace walrelay::snapshot {

namespace {

// Units: table index in the high bits, chunk number in the low 40.
constexpr int kChunkBits = 40;
constexpr std::uint64_t kChunkMask = (1ull << kChunkBits) - 1;

void append_decimal(std::string& out, std::uint64_t v) {
  char buf[20];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  out.append(buf, end);
}

// The column texts of `row` of `res` (nullopt for NULL), into `out`.
void texts_of(const PGresult* res, int row, std::vector<std::optional<std::string_view>>& out) {
  const int n = PQnfields(res);
  out.resize(static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c) {
    if (PQgetisnull(res, row, c) != 0) {
      out[static_cast<std::size_t>(c)] = std::nullopt;
    } else {
      out[static_cast<std::size_t>(c)] = std::string_view(
          PQgetvalue(res, row, c), static_cast<std::size_t>(PQgetlength(res, row, c)));
    }
  }
}

}  // namespace

SnapshotProgress Snapshotter::produced() const {
  SnapshotProgress out = progress_;
  for (std::size_t i = 0; i < tables_.size(); ++i) {
    const Table& t = tables_[i];
    TableProgress& p = out.tables[i];
    const bool keyed = !t.plan.key.empty();
    bool all_produced = true;
    t.chunks.for_each([&](std::uint64_t number, const Chunk& c, bool closed) {
      if (!closed) {
        all_produced = false;  // chunks are published in order: only the last can be open
        return;
      }
      p.rows += c.rows;
      p.chunks = number + 1;
      if (keyed) p.last_key = c.last_key;
    });
    // The chunk being published: its rows handed over so far.
    for (const Worker& w : workers_) {
      if (w.table != &t || !w.result || w.next_row == 0 || t.chunks.empty() ||
          t.chunks.back_closed()) {
        continue;
      }
      p.rows += static_cast<std::uint64_t>(w.next_row);
      p.chunks = t.chunks.next_seq();
      if (keyed) {
        std::vector<std::optional<std::string_view>> values;
        texts_of(w.result.get(), w.next_row - 1, values);
        p.last_key = key_of(t.plan, values);
      }
    }
    if (t.read_complete && all_produced) p.done = true;
  }
  return out;
}

void Snapshotter::row_values(const PGresult* res, int row) {
  texts_of(res, row, values_);
}

bool Snapshotter::publish_row(Worker& w, int row, std::string_view marker) {
  Table& t = *w.table;
  const TableProgress& p = *t.progress;
  const std::uint64_t number = t.chunks.next_seq() - 1;  // the chunk being published
  const std::uint64_t unit =
      (static_cast<std::uint64_t>(&t - tables_.data()) << kChunkBits) | (number & kChunkMask);
  row_values(w.result.get(), row);
  // id: the snapshot's LSN, the table, the chunk and the row within it (the same when a chunk is
  // read again after a restart).
  // Built in place: the prefix up to the chunk number is the same for every row of the table.
  if (t.id_prefix.empty())
    t.id_prefix = progress_.lsn.to_string() + ":r:" + p.schema + "." + p.table + ":";
  id_.assign(t.id_prefix);
  append_decimal(id_, number);
  id_.push_back(':');
  append_decimal(id_, static_cast<std::uint64_t>(row));
  std::string mapping_error;
  std::optional<std::span<const Record>> routed;
  if (auto built = build_row_change(t.plan, values_, settings_.numerics, settings_.check_utf8,
                                    progress_.lsn, progress_.xid, change_, tokens_);
      !built) {
    mapping_error = built.error();
  } else if (auto r =
                 router_.route_snapshot(change_, router::SnapshotRead{marker, id_, w.read_time});
             !r) {
    mapping_error = r.error().reason;
  } else {
    routed = *r;
  }
  if (!mapping_error.empty()) {
    const std::string reason = "snapshot of " + p.schema + "." + p.table + ": " + mapping_error;
    if (settings_.dead_letters == nullptr) {
      fail(SnapshotFailure::kMapping, reason);
      return false;
    }
    return dead_letter(t, unit, sink::DeadLetterKind::kMapping, reason, std::nullopt, true);
  }
  for (const Record& rec : *routed) {
    const sink::PublishResult published =
        publisher_.publish(sink::RecordSource::kSnapshot, rec, unit);
    if (published.status == sink::PublishStatus::kQueueFull) {
      // Published again from this row when delivery reports free room (one record per row).
      return false;
    }
    if (published.status == sink::PublishStatus::kTooLarge && settings_.dead_letters != nullptr) {
      // Over message.max.bytes (librdkafka rd_kafka_producev): its key and the reason.
      if (!dead_letter(t, unit, sink::DeadLetterKind::kOversize,
                       "snapshot row of " + p.schema + "." + p.table +
                           " is larger than the "
                           "producer's message.max.bytes",
                       rec.key, false)) {
        return false;
      }
      continue;
    }
    if (!published.queued()) {
      // kNoTransaction: delivery exactly_once could not open a Kafka transaction (the connector
      // aborts and restarts the session): retried like a fatal producer error.
      fail(published.restart() ? SnapshotFailure::kRetry : SnapshotFailure::kDelivery,
           "snapshot: cannot publish a row of " + p.schema + "." + p.table + " to topic " +
               std::string(rec.topic) + ": " + published.error());
      return false;
    }
    (void)t.chunks.add(number, kafka::record_bytes(rec));
  }
  return true;
}

bool Snapshotter::dead_letter(Table& t, std::uint64_t unit, sink::DeadLetterKind kind,
                              const std::string& reason, std::optional<std::string_view> key,
                              bool with_row) {
  // The stream's dead-letter path (docs/operations.md "Error policy"): the reason in headers; for
  // a row that cannot be mapped, its column texts as a JSON object.
  const TableProgress& p = *t.progress;
  std::string body;
  if (with_row) {
    body.push_back('{');
    for (std::size_t i = 0; i < values_.size() && i < t.plan.name_json.size(); ++i) {
      if (i > 0) body.push_back(',');
      body += t.plan.name_json[i];
      body.push_back(':');
      if (values_[i]) {
        json::append_string(body, *values_[i]);
      } else {
        body += "null";
      }
    }
    body.push_back('}');
  }
  const std::string source = p.schema + "." + p.table;
  const auto r = settings_.dead_letters->publish(
      sink::RecordSource::kSnapshot, unit,
      {kind, reason, source, progress_.lsn, id_, key,
       with_row ? std::optional<std::string_view>(body) : std::nullopt});
  // A full queue (or, exactly_once, a commit in progress): the row is published again, and
  // dead-lettered again, when there is room (maybe_continue).
  if (r.status == sink::PublishStatus::kQueueFull) return false;
  if (!r.queued()) {
    fail(SnapshotFailure::kDelivery, reason + "; publishing it to the dead-letter topic " +
                                         settings_.dead_letters->topic() +
                                         " failed too: " + r.error);
    return false;
  }
  (void)t.chunks.add(t.chunks.next_seq() - 1, r.bytes);  // the chunk being published
  return true;
}

void Snapshotter::finish_table_read(Worker& w) {
  Table& t = *w.table;
  t.read_complete = true;
  if (w.cursor) {
    (void)w.conn->exec("CLOSE walrelay_snapshot");
    w.cursor = false;
    end_read(w);
  }
  advance(t);
  next_table(w);
}

void Snapshotter::advance(Table& t) {
  TableProgress& p = *t.progress;
  const bool moved_on = t.chunks.pop_done([&](std::uint64_t number, Chunk&& c) {
    p.rows += c.rows;
    p.chunks = number + 1;
    rows_total_ += c.rows;
    if (!t.plan.key.empty()) p.last_key = std::move(c.last_key);
  }) > 0;
  bool moved = moved_on;
  if (t.read_complete && t.chunks.empty() && !t.progress->done) {
    t.progress->done = true;
    moved = true;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t.started).count();
    spdlog::info("snapshot: {}.{} done: {} rows in {:.1f} s", t.progress->schema, t.progress->table,
                 t.progress->rows, secs);
  }
  if (moved) save_progress(/*now=*/t.progress->done);
  check_done();
}

void Snapshotter::on_delivery(const kafka::DeliveryReport& r) {
  if (stopped_) return;
  const std::uint64_t table = r.opaque >> kChunkBits;
  const std::uint64_t number = r.opaque & kChunkMask;
  if (table >= tables_.size()) return;
  Table& t = tables_[table];
  if (r.err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const std::string reason = "snapshot: delivery failed for good: topic " + std::string(r.topic) +
                               ": " + rd_kafka_err2str(r.err);
    // Not a dead-letter record itself: its failure stops the snapshot.
    if (settings_.dead_letter_deliveries && settings_.dead_letters != nullptr &&
        r.topic != settings_.dead_letters->topic()) {
      // As the stream does: the dead-letter record takes the failed record's place in its chunk.
      const auto d = settings_.dead_letters->publish(
          sink::RecordSource::kSnapshot, r.opaque,
          {sink::DeadLetterKind::kDelivery, reason, r.topic, progress_.lsn, r.event_id,
           r.has_key ? std::optional<std::string_view>(r.key) : std::nullopt,
           r.has_value ? std::optional<std::string_view>(r.value) : std::nullopt});
      if (d.queued()) {
        (void)t.chunks.add(number, d.bytes);
        (void)t.chunks.try_ack(number, r.bytes);  // replaced by its dead letter
        return;
      }
      fail(SnapshotFailure::kDelivery, reason + "; publishing it to the dead-letter topic " +
                                           settings_.dead_letters->topic() +
                                           " failed too: " + d.error);
      return;
    }
    fail(SnapshotFailure::kDelivery, reason + "; the snapshot of " + t.progress->schema + "." +
                                         t.progress->table +
                                         " resumes from its last acknowledged chunk on restart");
    return;
  }
  // A report of a chunk no longer tracked (of an earlier run) changes nothing.
  (void)t.chunks.try_ack(number, r.bytes);
  advance(t);
}

void Snapshotter::maybe_continue() {
  if (stopped_ || reading_stopped_ || !has_room()) return;
  for (auto& w : workers_) {
    if (w.table == nullptr) continue;
    if (w.result) {
      publish_rows(w);  // a chunk paused by a full producer queue
    } else if (w.waiting) {
      continue;
    } else if (w.prefetched) {
      consume_prefetched(w);
    } else if (!w.table->read_complete) {
      read_chunk(w);
    }
    if (stopped_ || !has_room()) return;
  }
}

bool Snapshotter::has_room() const {
  // One chunk's worth of headroom below the shared bounds.
  return publisher_.in_flight_events(sink::RecordSource::kSnapshot) + settings_.chunk_size <=
             std::max(settings_.max_in_flight_events, settings_.chunk_size) &&
         publisher_.in_flight_bytes(sink::RecordSource::kSnapshot) < settings_.max_in_flight_bytes;
}

}  // namespace walrelay::snapshot
