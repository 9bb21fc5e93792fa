#include "walrelay/sink/kafka_transactions.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "walrelay/core/json.hpp"

namespace walrelay::sink {

bool is_fencing_error(rd_kafka_resp_err_t code) {
  return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

TxnResult classify_txn_error(rd_kafka_t* rk, rd_kafka_error_t* error) {
  TxnResult r;
  if (error == nullptr) return r;
  r.code = rd_kafka_error_code(error);
  r.message = rd_kafka_error_string(error);
  if (rd_kafka_error_is_fatal(error) != 0) {
    char buf[512];
    const rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, buf, sizeof buf);
    if (orig != RD_KAFKA_RESP_ERR_NO_ERROR) {
      r.code = orig;
      r.message = std::string(rd_kafka_err2name(orig)) + ": " + buf;
    }
    r.action = is_fencing_error(r.code) ? TxnAction::kFenced : TxnAction::kFatal;
  } else if (rd_kafka_error_txn_requires_abort(error) != 0) {
    r.action = TxnAction::kAbort;
  } else if (rd_kafka_error_is_retriable(error) != 0) {
    r.action = TxnAction::kRetry;
  } else if (is_fencing_error(r.code)) {
    r.action = TxnAction::kFenced;
  } else {
    // Neither retriable nor abortable nor fatal (e.g. ERR__STATE: a call out of order): the
    // transaction's state is unknown, so it is treated like an abortable one.
    r.action = TxnAction::kAbort;
  }
  rd_kafka_error_destroy(error);
  return r;
}

TxnResult KafkaTransactions::init(std::chrono::milliseconds timeout) {
  TxnResult r = classify_txn_error(
      producer_.handle(),
      rd_kafka_init_transactions(producer_.handle(), static_cast<int>(timeout.count())));
  if (r.ok()) initialized_ = true;
  return r;
}

TxnResult KafkaTransactions::begin() {
  TxnResult r =
      classify_txn_error(producer_.handle(), rd_kafka_begin_transaction(producer_.handle()));
  if (r.ok()) open_ = true;
  return r;
}

TxnResult KafkaTransactions::commit(std::chrono::milliseconds timeout) {
  TxnResult r = classify_txn_error(
      producer_.handle(),
      rd_kafka_commit_transaction(producer_.handle(), static_cast<int>(timeout.count())));
  producer_.poll();  // delivery reports that arrived after librdkafka's own flush
  if (r.ok()) open_ = false;
  return r;
}

TxnResult KafkaTransactions::abort(std::chrono::milliseconds timeout) {
  TxnResult r = classify_txn_error(
      producer_.handle(),
      rd_kafka_abort_transaction(producer_.handle(), static_cast<int>(timeout.count())));
  producer_.poll();  // the purged messages' delivery reports
  if (r.ok()) open_ = false;
  return r;
}

config::KafkaConfig transactional_properties(const config::KafkaConfig& cfg,
                                             const std::string& id) {
  config::KafkaConfig out = cfg;
  out.properties.try_emplace("transactional.id", id);
  out.properties.try_emplace("transaction.timeout.ms", "60000");
  if (auto it = cfg.properties.find("message.timeout.ms"); it == cfg.properties.end()) {
    out.properties["message.timeout.ms"] = out.properties["transaction.timeout.ms"];
  }
  return out;
}

std::string transactional_id_for(std::string_view connector_name) {
  return "walrelay-" + std::string(connector_name);
}

// --------------------------------------------------------------------------------- position

namespace {

void append_progress(std::string& out, const snapshot::SnapshotProgress& p) {
  out += "{\"slot\":";
  json::append_string(out, p.slot);
  out += ",\"lsn\":\"" + p.lsn.to_string() + "\",\"xid\":" + std::to_string(p.xid) +
         ",\"resumed\":" + (p.resumed ? "true" : "false") + ",\"tables\":[";
  for (std::size_t i = 0; i < p.tables.size(); ++i) {
    const snapshot::TableProgress& t = p.tables[i];
    if (i > 0) out.push_back(',');
    out += "{\"schema\":";
    json::append_string(out, t.schema);
    out += ",\"table\":";
    json::append_string(out, t.table);
    out += std::string(",\"done\":") + (t.done ? "true" : "false") +
           ",\"rows\":" + std::to_string(t.rows) + ",\"chunks\":" + std::to_string(t.chunks);
    if (t.last_key) {
      out += ",\"last_key\":[";
      for (std::size_t k = 0; k < t.last_key->size(); ++k) {
        if (k > 0) out.push_back(',');
        if (const auto& v = (*t.last_key)[k]) {
          json::append_string(out, *v);
        } else {
          out += "null";
        }
      }
      out.push_back(']');
    }
    out.push_back('}');
  }
  out += "]}";
}

std::optional<snapshot::SnapshotProgress> parse_progress(simdjson::dom::element e) {
  snapshot::SnapshotProgress p;
  std::string_view slot;
  std::string_view lsn;
  std::uint64_t xid = 0;
  bool resumed = false;
  simdjson::dom::array tables;
  if (e["slot"].get(slot) || e["lsn"].get(lsn) || e["xid"].get(xid) || e["resumed"].get(resumed) ||
      e["tables"].get(tables)) {
    return std::nullopt;
  }
  const auto parsed_lsn = Lsn::parse(lsn);
  if (!parsed_lsn) return std::nullopt;
  p.slot = slot;
  p.lsn = *parsed_lsn;
  p.xid = xid;
  p.resumed = resumed;
  for (simdjson::dom::element t : tables) {
    snapshot::TableProgress tp;
    std::string_view schema;
    std::string_view table;
    if (t["schema"].get(schema) || t["table"].get(table) || t["done"].get(tp.done) ||
        t["rows"].get(tp.rows) || t["chunks"].get(tp.chunks)) {
      return std::nullopt;
    }
    tp.schema = schema;
    tp.table = table;
    simdjson::dom::array key;
    if (auto k = t["last_key"]; k.error() == simdjson::SUCCESS) {
      if (k.get(key)) return std::nullopt;
      snapshot::KeyText text;
      for (simdjson::dom::element v : key) {
        std::string_view s;
        if (v.is_null()) {
          text.emplace_back(std::nullopt);
        } else if (v.get(s) == simdjson::SUCCESS) {
          text.emplace_back(std::string(s));
        } else {
          return std::nullopt;
        }
      }
      tp.last_key = std::move(text);
    }
    p.tables.push_back(std::move(tp));
  }
  return p;
}

}  // namespace

std::string encode_position(const StreamPosition& p) {
  std::string out = "{\"system_id\":";
  json::append_string(out, p.system_id);
  out += ",\"timeline\":" + std::to_string(p.timeline) + ",\"lsn\":\"" + p.lsn.to_string() +
         "\",\"index\":" + std::to_string(p.index);
  if (p.snapshot) {
    out += ",\"snapshot\":";
    append_progress(out, *p.snapshot);
  }
  if (p.incremental) {
    out += ",\"incremental\":";
    append_progress(out, *p.incremental);
  }
  out.push_back('}');
  return out;
}

std::optional<StreamPosition> decode_position(std::string_view value) {
  // Reused: read_position decodes every record of the topic since its last compaction.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(value.data(), value.size()).get(doc) != simdjson::SUCCESS) return std::nullopt;
  StreamPosition p;
  std::string_view system_id;
  std::string_view lsn_text;
  std::uint64_t timeline = 0;
  std::int64_t index = 0;
  if (doc["system_id"].get(system_id) || doc["timeline"].get(timeline) ||
      doc["lsn"].get(lsn_text) || doc["index"].get(index) || index < -1 ||
      timeline > std::numeric_limits<std::uint32_t>::max()) {
    return std::nullopt;
  }
  const auto lsn = Lsn::parse(lsn_text);
  if (!lsn) return std::nullopt;
  p.system_id = system_id;
  p.timeline = static_cast<std::uint32_t>(timeline);
  p.lsn = *lsn;
  p.index = index;
  for (auto [name, field] : {std::pair{"snapshot", &StreamPosition::snapshot},
                             std::pair{"incremental", &StreamPosition::incremental}}) {
    simdjson::dom::element section;
    if (doc[name].get(section) != simdjson::SUCCESS) continue;
    auto progress = parse_progress(section);
    if (!progress) return std::nullopt;
    p.*field = std::move(*progress);
  }
  return p;
}

std::string positions_topic(std::string_view prefix) {
  return std::string(prefix) + ".walrelay.positions";
}

namespace {

// Connection and security settings of kafka.properties that a consumer or admin client needs
// too (the producer-only ones would only make librdkafka warn).
rd_kafka_conf_t* client_conf(const config::KafkaConfig& cfg, std::string& error) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  std::map<std::string, std::string> props = {{"bootstrap.servers", cfg.bootstrap_servers}};
  for (const auto& [k, v] : cfg.properties) {
    for (const char* shared : {"security.", "sasl.", "ssl.", "socket.", "broker.", "client.dns",
                               "api.version", "metadata.", "client.id"}) {
      if (k.starts_with(shared)) props[k] = v;
    }
  }
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
      error = "kafka.properties." + k + ": " + errstr;
      rd_kafka_conf_destroy(conf);
      return nullptr;
    }
  }
  rd_kafka_conf_set_log_cb(conf,
                           [](const rd_kafka_t*, int level, const char* fac, const char* buf) {
                             if (level <= 3)
                               spdlog::warn("librdkafka (positions) {}: {}", fac, buf);
                           });
  return conf;
}

struct RkDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using RkPtr = std::unique_ptr<rd_kafka_t, RkDeleter>;

}  // namespace

// ------------------------------------------------------------------- positions topic creation

struct PositionsTopicCreation::State {
  RkPtr rk;
  std::string topic;
  rd_kafka_queue_t* queue = nullptr;
  std::chrono::steady_clock::time_point deadline;
  ~State() {
    if (queue != nullptr) rd_kafka_queue_destroy(queue);
  }
};

PositionsTopicCreation::PositionsTopicCreation(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
PositionsTopicCreation::PositionsTopicCreation(PositionsTopicCreation&&) noexcept = default;
PositionsTopicCreation& PositionsTopicCreation::operator=(PositionsTopicCreation&&) noexcept =
    default;
PositionsTopicCreation::~PositionsTopicCreation() = default;

std::expected<PositionsTopicCreation, std::string> PositionsTopicCreation::start(
    const config::KafkaConfig& cfg, const std::string& topic, std::chrono::milliseconds timeout) {
  std::string error;
  rd_kafka_conf_t* conf = client_conf(cfg, error);
  if (conf == nullptr) return std::unexpected(error);
  char errstr[512];
  auto state = std::make_unique<State>();
  state->rk.reset(rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr));
  if (!state->rk) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(std::string("cannot create a Kafka admin client: ") + errstr);
  }
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), 1, -1, errstr, sizeof errstr);
  if (nt == nullptr) return std::unexpected(std::string(errstr));
  rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
  state->topic = topic;
  state->queue = rd_kafka_queue_new(state->rk.get());
  rd_kafka_AdminOptions_t* opts =
      rd_kafka_AdminOptions_new(state->rk.get(), RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(opts, static_cast<int>(timeout.count()), errstr,
                                            sizeof errstr);
  rd_kafka_CreateTopics(state->rk.get(), &nt, 1, opts, state->queue);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_NewTopic_destroy(nt);
  state->deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(1);
  return PositionsTopicCreation(std::move(state));
}

std::optional<std::expected<void, std::string>> PositionsTopicCreation::poll(
    std::chrono::milliseconds wait) {
  const auto now = std::chrono::steady_clock::now();
  const auto left =
      std::max(std::chrono::milliseconds(0),
               std::chrono::duration_cast<std::chrono::milliseconds>(state_->deadline - now));
  rd_kafka_event_t* ev =
      rd_kafka_queue_poll(state_->queue, static_cast<int>(std::min(wait, left).count()));
  if (ev == nullptr) {
    if (std::chrono::steady_clock::now() < state_->deadline) return std::nullopt;
    return std::unexpected(std::string("no answer from Kafka within the timeout"));
  }
  std::expected<void, std::string> result =
      std::unexpected(std::string("an unexpected answer from Kafka"));
  if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = std::unexpected(std::string(rd_kafka_event_error_string(ev)));
  } else if (const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
             res != nullptr) {
    std::size_t n = 0;
    const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(res, &n);
    const rd_kafka_resp_err_t err =
        n == 1 ? rd_kafka_topic_result_error(topics[0]) : RD_KAFKA_RESP_ERR__FAIL;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      spdlog::info("created the compacted positions topic {}", state_->topic);
      result = {};
    } else if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      result = {};
    } else {
      const char* text = n == 1 ? rd_kafka_topic_result_error_string(topics[0]) : nullptr;
      result = std::unexpected(std::string(rd_kafka_err2str(err)) +
                               (text != nullptr ? std::string(": ") + text : std::string()));
    }
  }
  rd_kafka_event_destroy(ev);
  return result;
}

std::expected<void, std::string> ensure_positions_topic(const config::KafkaConfig& cfg,
                                                        const std::string& topic,
                                                        std::chrono::milliseconds timeout) {
  auto creation = PositionsTopicCreation::start(cfg, topic, timeout);
  if (!creation) return std::unexpected(creation.error());
  for (;;) {
    if (auto done = creation->poll(std::chrono::milliseconds(1000))) return *done;
  }
}

// ----------------------------------------------------------------------------- position reader

namespace {

// No answer within the call's timeout: no broker usable yet (rd_kafka_metadata answers
// ERR__TRANSPORT when none became usable within it) or no response. A call for a slice is made
// again until the overall deadline, as one call for all of it would have waited.
bool no_answer_yet(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__TRANSPORT ||
         err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN;
}

}  // namespace

struct PositionReader::State {
  enum class Phase : std::uint8_t { kMetadata, kOffsets, kConsume };
  RkPtr rk;
  std::string topic;
  std::string key;
  std::chrono::milliseconds timeout{0};
  std::chrono::steady_clock::time_point deadline;
  Phase phase = Phase::kMetadata;
  std::vector<std::int32_t> partitions;
  std::size_t next_partition = 0;            // kOffsets: the next partition to query
  std::set<std::int32_t> pending;            // kConsume: partitions not at their end yet
  std::map<std::int32_t, std::int64_t> end;  // high watermark at the start
  std::optional<StreamPosition> last;
  bool assigned = false;

  ~State() {
    if (rk && assigned) {
      rd_kafka_assign(rk.get(), nullptr);
      rd_kafka_consumer_close(rk.get());
    }
  }
  /// ms left of `stop` (a slice's end) and of the deadline, at least 0.
  [[nodiscard]] int left(std::chrono::steady_clock::time_point stop) const {
    const auto until = std::min(stop, deadline);
    return static_cast<int>(std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(until -
                                                                 std::chrono::steady_clock::now())
               .count()));
  }
  [[nodiscard]] bool expired() const { return std::chrono::steady_clock::now() >= deadline; }
};

PositionReader::PositionReader(std::unique_ptr<State> state) : state_(std::move(state)) {}
PositionReader::PositionReader(PositionReader&&) noexcept = default;
PositionReader& PositionReader::operator=(PositionReader&&) noexcept = default;
PositionReader::~PositionReader() = default;

std::expected<PositionReader, std::string> PositionReader::start(
    const config::KafkaConfig& cfg, const std::string& topic, const std::string& key,
    std::chrono::milliseconds timeout) {
  std::string error;
  rd_kafka_conf_t* conf = client_conf(cfg, error);
  if (conf == nullptr) return std::unexpected(error);
  char errstr[512];
  for (const auto& [k, v] :
       std::map<std::string, std::string>{{"isolation.level", "read_committed"},
                                          {"enable.partition.eof", "true"},
                                          // the end is reached with an empty fetch: do not let
                                          // the broker hold it for the default 500 ms
                                          {"fetch.wait.max.ms", "10"},
                                          {"enable.auto.commit", "false"},
                                          {"allow.auto.create.topics", "false"},
                                          // rd_kafka_consumer_poll needs a group id (else
                                          // ERR__UNKNOWN_GROUP); assign only: the group is
                                          // never joined and nothing is committed.
                                          {"group.id", "walrelay-positions-" + key}}) {
    rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof errstr);
  }
  auto state = std::make_unique<State>();
  state->rk.reset(rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr));
  if (!state->rk) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(std::string("cannot create a Kafka consumer: ") + errstr);
  }
  state->topic = topic;
  state->key = key;
  state->timeout = timeout;
  state->deadline = std::chrono::steady_clock::now() + timeout;
  return PositionReader(std::move(state));
}

std::optional<std::expected<std::optional<StreamPosition>, std::string>> PositionReader::poll(
    std::chrono::milliseconds wait) {
  using Phase = State::Phase;
  State& s = *state_;
  const auto stop = std::chrono::steady_clock::now() + wait;
  const std::string& topic = s.topic;
  // One librdkafka call per round, each for at most what is left of `wait`: a timed-out call is
  // made again (a new request) until the deadline.
  do {
    if (s.phase == Phase::kMetadata) {
      rd_kafka_topic_t* rkt = rd_kafka_topic_new(s.rk.get(), topic.c_str(), nullptr);
      const rd_kafka_metadata_t* md = nullptr;
      const rd_kafka_resp_err_t err =
          rd_kafka_metadata(s.rk.get(), 0, rkt, &md, std::max(1, s.left(stop)));
      rd_kafka_topic_destroy(rkt);
      if (no_answer_yet(err) && !s.expired()) continue;
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        return std::unexpected(std::string("cannot read the metadata of ") + topic + ": " +
                               rd_kafka_err2str(err));
      }
      bool missing = false;
      for (int i = 0; i < md->topic_cnt; ++i) {
        if (topic != md->topics[i].topic) continue;
        if (md->topics[i].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) missing = true;
        for (int p = 0; p < md->topics[i].partition_cnt; ++p)
          s.partitions.push_back(md->topics[i].partitions[p].id);
      }
      rd_kafka_metadata_destroy(md);
      if (missing || s.partitions.empty()) return std::optional<StreamPosition>{};
      s.phase = Phase::kOffsets;
    } else if (s.phase == Phase::kOffsets) {
      if (s.next_partition < s.partitions.size()) {
        const std::int32_t p = s.partitions[s.next_partition];
        std::int64_t lo = 0;
        std::int64_t hi = 0;
        const rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
            s.rk.get(), topic.c_str(), p, &lo, &hi, std::max(1, s.left(stop)));
        if (no_answer_yet(err) && !s.expired()) continue;
        if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
          return std::unexpected(std::string("cannot read the offsets of ") + topic + ": " +
                                 rd_kafka_err2str(err));
        }
        ++s.next_partition;
        if (hi > lo) {
          s.end[p] = hi;
          s.pending.insert(p);
        }
        continue;
      }
      if (s.pending.empty()) return s.last;
      rd_kafka_topic_partition_list_t* list =
          rd_kafka_topic_partition_list_new(static_cast<int>(s.pending.size()));
      for (const std::int32_t p : s.pending) {
        rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
      }
      rd_kafka_assign(s.rk.get(), list);
      rd_kafka_topic_partition_list_destroy(list);
      s.assigned = true;
      s.phase = Phase::kConsume;
    } else {
      // Up to the end: with read_committed, the end-of-partition event comes at the last stable
      // offset, after the last committed record (aborted records and control records are
      // skipped); a record at the high watermark's last offset ends a partition too (a broker
      // without control records, such as librdkafka's mock cluster).
      if (s.expired()) {
        return std::unexpected("cannot read " + topic + " to its end within " +
                               std::to_string(s.timeout.count()) +
                               " ms (a transaction of another producer may still be open)");
      }
      rd_kafka_message_t* m = rd_kafka_consumer_poll(s.rk.get(), std::min(s.left(stop), 200));
      if (m == nullptr) continue;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        s.pending.erase(m->partition);
      } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const std::string_view k(static_cast<const char*>(m->key), m->key_len);
        if (m->key != nullptr && k == s.key && m->payload != nullptr) {
          if (auto p =
                  decode_position(std::string_view(static_cast<const char*>(m->payload), m->len))) {
            s.last = std::move(*p);
          } else {
            spdlog::warn("ignoring an unreadable position record in {} at offset {}", topic,
                         m->offset);
          }
        }
        if (m->offset + 1 >= s.end[m->partition]) s.pending.erase(m->partition);
      } else if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_GROUP || m->err == RD_KAFKA_RESP_ERR__FATAL) {
        const std::string why = rd_kafka_message_errstr(m);
        rd_kafka_message_destroy(m);
        return std::unexpected("reading " + topic + ": " + why);
      } else {
        spdlog::debug("reading {}: {}", topic, rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
      if (s.pending.empty()) return s.last;
    }
  } while (std::chrono::steady_clock::now() < stop);
  return std::nullopt;
}

std::expected<std::optional<StreamPosition>, std::string> read_position(
    const config::KafkaConfig& cfg, const std::string& topic, const std::string& key,
    std::chrono::milliseconds timeout) {
  auto reader = PositionReader::start(cfg, topic, key, timeout);
  if (!reader) return std::unexpected(reader.error());
  for (;;) {
    if (auto done = reader->poll(std::chrono::milliseconds(1000))) return *done;
  }
}

}  // namespace walrelay::sink
