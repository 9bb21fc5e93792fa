#include "walrelay/inbox/inbox.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>

#include "decide.hpp"
#include "walrelay/inbox/schema.hpp"

namespace walrelay::inbox {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using detail::Failure;

namespace {

constexpr std::chrono::milliseconds kFirstBackoff = 100ms;
constexpr std::chrono::milliseconds kMaxBackoff = 5s;
constexpr std::chrono::milliseconds kIdlePoll = 5ms;  // between polls that found nothing
constexpr std::chrono::milliseconds kFillPoll = 1ms;  // while a batch fills
constexpr std::chrono::milliseconds kSeekTimeout = 10s;
constexpr std::chrono::milliseconds kMaintenanceInterval = 10s;
constexpr int kPruneRows = 10'000;  // ledger rows deleted per maintenance round at most

std::string where(const std::string& topic, std::int32_t partition) {
  return topic + " [" + std::to_string(partition) + "]";
}

}  // namespace

Inbox::Inbox(asio::io_context& io, config::Config cfg)
    : io_(io),
      cfg_(std::move(cfg)),
      conn_(io.get_executor(), cfg_.inbox.conninfo, "walrelay inbox " + cfg_.inbox.group_id),
      decider_(std::make_unique<detail::Decider>(conn_, io.get_executor(), cfg_.inbox)),
      total_(std::make_unique<detail::Counts>()) {}

Inbox::~Inbox() = default;

void Inbox::start(app::Lifecycle& life) {
  life_ = &life;
  kafka::ConsumerOptions options;
  options.group_id = cfg_.inbox.group_id;
  options.log_name = "inbox";
  // A partition without a stored offset is read from its beginning (the seek says so); the
  // group's own commits are never used for a position.
  // session.timeout.ms 10 s instead of librdkafka's 45 s (CONFIGURATION.md): a killed inbox's
  // partitions go to another member (or its own restart) within 10 s; the broker's
  // group.min.session.timeout.ms is 6 s by default.
  options.properties = {{"auto.offset.reset", "earliest"},
                        {"enable.auto.offset.store", "false"},
                        {"session.timeout.ms", "10000"}};
  options.on_rebalance = [this](kafka::Rebalance what,
                                const std::vector<kafka::PartitionOffset>& parts) {
    on_rebalance(what, parts);
  };
  auto consumer = kafka::Consumer::create(cfg_.kafka, options);
  if (!consumer) {
    spdlog::error("inbox: {}", consumer.error().message);
    asio::post(io_, [this] { finish(ExitCode::kRuntimeError); });
    return;
  }
  consumer_.emplace(std::move(*consumer));
  if (auto sub = consumer_->subscribe(cfg_.inbox.topics); !sub) {
    spdlog::error("inbox: cannot subscribe: {}", sub.error().message);
    asio::post(io_, [this] { finish(ExitCode::kRuntimeError); });
    return;
  }
  std::string topics;
  for (const auto& t : cfg_.inbox.topics) topics += (topics.empty() ? "" : ", ") + t;
  spdlog::info("inbox: group {} consuming {} into schema {}", cfg_.inbox.group_id, topics,
               cfg_.inbox.schema);
  last_progress_ = std::chrono::steady_clock::now();
  start_metrics();
  asio::co_spawn(io_, main(), [this](const std::exception_ptr& e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("inbox: {}", ex.what());
    }
    finish(ExitCode::kRuntimeError);
  });
}

void Inbox::stop(app::StopMode mode) {
  if (mode == app::StopMode::kGraceful) {
    stopping_ = true;  // the loop commits the batch in progress, then ends
    return;
  }
  finish(ExitCode::kOk);  // what is not committed is read again by the next start
}

void Inbox::finish(ExitCode code) {
  if (finished_) return;
  finished_ = true;
  if (http_) http_->stop();
  log_progress(true);
  if (consumer_) consumer_->close();
  if (life_ != nullptr) life_->done(code);
}

void Inbox::log_progress(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_progress_ < cfg_.log.progress_interval) return;
  last_progress_ = now;
  spdlog::info("inbox: {} applied, {} duplicate, {} deferred, {} quarantined, {} skipped",
               total_->applied, total_->duplicate, total_->deferred, total_->quarantined,
               total_->skipped);
}

asio::awaitable<void> Inbox::sleep(std::chrono::milliseconds d) {
  asio::steady_timer timer(io_, d);
  boost::system::error_code ignored;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

void Inbox::on_rebalance(kafka::Rebalance what, const std::vector<kafka::PartitionOffset>& parts) {
  if (what == kafka::Rebalance::kAssigned) joined_ = true;
  for (const auto& p : parts) {
    const PartitionKey key{p.topic, p.partition};
    if (what == kafka::Rebalance::kAssigned) {
      partitions_[key] = Partition{};
      pending_.push_back(key);
      continue;
    }
    spdlog::info("inbox: {} revoked", where(p.topic, p.partition));
    partitions_.erase(key);
    std::erase(pending_, key);
    // Not decided yet: the partition's next owner reads them from the stored offset.
    std::erase_if(batch_,
                  [&](const Event& e) { return e.topic == p.topic && e.partition == p.partition; });
  }
}

bool Inbox::collect() {
  bool any = false;
  while (batch_.size() < cfg_.inbox.batch_max_events && !finished_) {
    auto m = consumer_->poll(0ms);
    if (!m) break;
    if (!m->is_record()) {
      const kafka::Error e = m->error();
      if (e.fatal) {
        spdlog::error("inbox: fatal consumer error: {}", e.message);
        finish(ExitCode::kRuntimeError);
        return any;
      }
      spdlog::warn("inbox: consumer: {}", e.message);
      continue;
    }
    const auto it = partitions_.find({std::string(m->topic()), m->partition()});
    // Fetched before the seek to the stored offset (or after a revocation): read again later.
    if (it == partitions_.end() || !it->second.ready) continue;
    if (it->second.next >= 0 && m->offset() < it->second.next) continue;
    it->second.next = m->offset() + 1;
    batch_.push_back(read_event(*m, cfg_.inbox));
    any = true;
  }
  return any;
}

asio::awaitable<bool> Inbox::create_schema() {
  auto backoff = kFirstBackoff;
  while (!finished_) {
    detail::Answer a =
        co_await detail::simple(conn_, io_.get_executor(), schema_sql(cfg_.inbox.schema));
    if (a.ok()) {
      schema_ready_ = db_ok_ = true;
      co_return true;
    }
    db_ok_ = false;
    (void)co_await detail::simple(conn_, io_.get_executor(), std::string("ROLLBACK"));
    if (detail::classify(a.error) != Failure::kRetry || a.error.needs_operator()) {
      spdlog::error("inbox: cannot create the schema {}: {}", cfg_.inbox.schema, a.error.message);
      finish(ExitCode::kRuntimeError);
      co_return false;
    }
    if (stopping_) {
      finish(ExitCode::kOk);
      co_return false;
    }
    spdlog::warn("inbox: database unavailable ({}); retrying in {} ms", a.error.message,
                 backoff.count());
    co_await sleep(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  co_return false;
}

asio::awaitable<bool> Inbox::take_assignments() {
  auto backoff = kFirstBackoff;
  std::map<PartitionKey, std::int64_t> stored;
  while (!finished_) {
    detail::Answer a =
        co_await detail::query(conn_, io_.get_executor(),
                               "SELECT topic, kafka_partition, next_offset FROM " +
                                   cfg_.inbox.schema + ".offsets WHERE group_id = $1",
                               detail::params(cfg_.inbox.group_id));
    db_ok_ = a.ok();
    if (a.ok()) {
      for (const auto& row : *a.rows) {
        stored[{row[0].value_or(""), static_cast<std::int32_t>(std::stol(row[1].value_or("0")))}] =
            std::stoll(row[2].value_or("0"));
      }
      break;
    }
    if (detail::classify(a.error) == Failure::kFatal || a.error.needs_operator()) {
      spdlog::error("inbox: cannot read the stored offsets: {}", a.error.message);
      finish(ExitCode::kRuntimeError);
      co_return false;
    }
    if (stopping_) {
      finish(ExitCode::kOk);
      co_return false;
    }
    spdlog::warn("inbox: database unavailable ({}); retrying in {} ms", a.error.message,
                 backoff.count());
    co_await sleep(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  if (finished_) co_return false;
  std::vector<kafka::PartitionOffset> seek;
  for (const auto& key : pending_) {
    const auto it = stored.find(key);
    seek.push_back(
        {key.first, key.second, it == stored.end() ? kafka::kOffsetBeginning : it->second});
  }
  for (int attempt = 0;; ++attempt) {
    auto sought = consumer_->seek(seek, kSeekTimeout);
    if (sought) break;
    if (attempt >= 20 || stopping_) {
      spdlog::error("inbox: cannot seek to the stored offsets: {}", sought.error().message);
      finish(ExitCode::kRuntimeError);
      co_return false;
    }
    co_await sleep(200ms);
  }
  if (auto resumed = consumer_->resume(seek); !resumed) {
    spdlog::error("inbox: cannot resume the assigned partitions: {}", resumed.error().message);
    finish(ExitCode::kRuntimeError);
    co_return false;
  }
  for (const auto& p : seek) {
    auto& part = partitions_[{p.topic, p.partition}];
    part.ready = true;
    part.next = p.offset >= 0 ? p.offset : -1;
    part.committed = part.next;
    spdlog::info(
        "inbox: {} assigned, from {}", where(p.topic, p.partition),
        p.offset >= 0 ? "stored offset " + std::to_string(p.offset) : std::string("its beginning"));
  }
  pending_.clear();
  co_return true;
}

asio::awaitable<bool> Inbox::commit_batch() {
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> next;
  for (const Event& e : batch_) {
    auto& n = next[{e.topic, e.partition}];
    n = std::max(n, e.offset + 1);
  }
  auto backoff = kFirstBackoff;
  while (!finished_) {
    const auto t0 = std::chrono::steady_clock::now();
    detail::BatchResult r = co_await decider_->run(batch_, next);
    if (finished_) co_return false;
    db_ok_ = r.outcome != detail::Outcome::kRetry;
    if (r.outcome == detail::Outcome::kCommitted) {
      ++batches_;
      batch_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (const auto& entry : r.by_topic) by_topic_[entry.first] += entry.second;
      spdlog::debug(
          "inbox: batch of {} committed: {} applied, {} duplicate, {} deferred, {} "
          "quarantined",
          batch_.size(), r.counts.applied, r.counts.duplicate, r.counts.deferred,
          r.counts.quarantined);
      *total_ += r.counts;
      batch_.clear();
      // Kafka's view of the group's position, for lag monitors only (kafka-consumer-groups.sh):
      // the inbox itself always starts from the offsets stored with the decisions.
      std::vector<kafka::PartitionOffset> advisory;
      for (const auto& entry : next) {
        advisory.push_back({entry.first.first, entry.first.second, entry.second});
        const auto part = partitions_.find(entry.first);
        if (part != partitions_.end()) part->second.committed = entry.second;
      }
      if (auto c = consumer_->commit_async(advisory); !c) {
        spdlog::debug("inbox: advisory Kafka commit not queued: {}", c.error().message);
      }
      co_return true;
    }
    if (r.outcome == detail::Outcome::kFatal) {
      spdlog::error("inbox: a batch of {} events failed and retrying cannot help: {}",
                    batch_.size(), r.error.message);
      finish(ExitCode::kRuntimeError);
      co_return false;
    }
    if (stopping_) {
      spdlog::info(
          "inbox: stopping with a batch of {} events not committed (read again by the "
          "next start): {}",
          batch_.size(), r.error.message);
      finish(ExitCode::kOk);
      co_return false;
    }
    ++retries_;
    spdlog::warn("inbox: batch of {} events rolled back ({}{}); deciding it again in {} ms",
                 batch_.size(), r.error.sqlstate.empty() ? "" : r.error.sqlstate + " ",
                 r.error.message, backoff.count());
    co_await sleep(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  co_return false;
}

asio::awaitable<void> Inbox::maintenance() {
  const std::string& s = cfg_.inbox.schema;
  // A gap older than defer_timeout: its deferred events are QUARANTINED and reported.
  detail::Answer a = co_await detail::query(
      conn_, io_.get_executor(),
      "WITH expired AS (DELETE FROM " + s +
          ".deferred d WHERE deferred_at < now() - "
          "make_interval(secs => $1::bigint / 1000.0) RETURNING d.*), "
          "q AS (INSERT INTO " +
          s +
          ".quarantine (tenant, event_id, digest, aggregate, version, "
          "event_type, topic, kafka_partition, kafka_offset, record_key, payload, headers, reason) "
          "SELECT tenant, event_id, digest, aggregate, version, event_type, topic, "
          "kafka_partition, "
          "kafka_offset, convert_to(record_key, 'UTF8'), convert_to(payload, 'UTF8'), headers, "
          "'defer_timeout: version ' || version || ' waited longer than inbox.defer_timeout for "
          "version ' || expected_version FROM expired RETURNING 1) "
          "UPDATE " +
          s +
          ".ledger l SET decision = 'QUARANTINED', reason = 'defer_timeout', "
          "decided_at = now() FROM expired e WHERE l.tenant = e.tenant AND l.event_id = e.event_id "
          "RETURNING l.event_id",
      detail::params(std::to_string(cfg_.inbox.defer_timeout.count())));
  if (!a.ok()) {
    spdlog::warn("inbox: cannot quarantine the expired deferred events: {}", a.error.message);
  } else if (!a.rows->empty()) {
    spdlog::warn("inbox: {} deferred events waited longer than inbox.defer_timeout: QUARANTINED",
                 a.rows->size());
    total_->quarantined += a.rows->size();
  }
  // The gauges of /metrics: what waits now and since when.
  a = co_await detail::query(conn_, io_.get_executor(),
                             "SELECT (SELECT count(*) FROM " + s +
                                 ".deferred), (SELECT coalesce(extract(epoch FROM "
                                 "now() - min(deferred_at)), 0) FROM " +
                                 s + ".deferred), (SELECT count(*) FROM " + s +
                                 ".quarantine), (SELECT coalesce(extract(epoch FROM now() - "
                                 "min(quarantined_at)), 0) FROM " +
                                 s + ".quarantine)");
  db_ok_ = a.ok();
  if (a.ok() && !a.rows->empty()) {
    const auto& row = a.rows->front();
    deferred_now_ = std::stoull(row[0].value_or("0"));
    oldest_deferred_s_ = std::stod(row[1].value_or("0"));
    quarantined_now_ = std::stoull(row[2].value_or("0"));
    oldest_quarantined_s_ = std::stod(row[3].value_or("0"));
  }
  // Ledger rows past the retention (never a deferred one's: it is still to be decided).
  a = co_await detail::query(
      conn_, io_.get_executor(),
      "DELETE FROM " + s + ".ledger WHERE ctid IN (SELECT ctid FROM " + s +
          ".ledger WHERE last_seen < now() - make_interval(secs => $1::bigint / 1000.0) "
          "AND decision <> 'DEFERRED' LIMIT " +
          std::to_string(kPruneRows) + ")",
      detail::params(std::to_string(cfg_.inbox.retention.count())));
  if (!a.ok()) spdlog::warn("inbox: cannot prune the ledger: {}", a.error.message);
}

asio::awaitable<void> Inbox::main() {
  if (!co_await create_schema()) co_return;
  co_await maintenance();  // the gauges from the start
  last_maintenance_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  while (!finished_) {
    if (!pending_.empty()) {
      if (!co_await take_assignments()) co_return;
      continue;
    }
    const bool got = collect();
    if (finished_) co_return;
    const auto now = std::chrono::steady_clock::now();
    if (!batch_.empty() && !deadline) deadline = now + cfg_.inbox.batch_max_wait;
    const bool full = batch_.size() >= cfg_.inbox.batch_max_events;
    if (!batch_.empty() && (full || stopping_ || !pending_.empty() || now >= *deadline)) {
      deadline.reset();
      if (!co_await commit_batch()) co_return;
      log_progress(false);
      continue;
    }
    if (batch_.empty()) deadline.reset();
    if (stopping_) break;
    if (batch_.empty() && now - last_maintenance_ >= kMaintenanceInterval) {
      last_maintenance_ = now;
      co_await maintenance();
      continue;
    }
    if (!got) co_await sleep(batch_.empty() ? kIdlePoll : kFillPoll);
    log_progress(false);
  }
  finish(ExitCode::kOk);
}

ExitCode run_inbox(config::Config cfg) {
  for (std::size_t i = 0; i < cfg.inbox.handlers.size(); ++i) {
    if (placeholder_count(cfg.inbox.handlers[i].sql) > 4) {
      spdlog::error(
          "inbox.handlers[{}].sql: uses more than $4 (the payload, event id, key and "
          "headers)",
          i);
      return ExitCode::kConfigError;
    }
  }
  asio::io_context io(1);
  Inbox inbox(io, std::move(cfg));
  return app::run(io, inbox);
}

}  // namespace walrelay::inbox
