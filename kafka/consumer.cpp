#include "walrelay/kafka/consumer.hpp"

#include <algorithm>
#include <cstring>

#include "client_config.hpp"
#include "metadata.hpp"

namespace walrelay::kafka {

namespace {

int ms(std::chrono::milliseconds timeout) {
  return static_cast<int>(std::max<long long>(0, timeout.count()));
}

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

ListPtr to_list(const std::vector<PartitionOffset>& offsets) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const PartitionOffset& o : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), o.topic.c_str(), o.partition)->offset = o.offset;
  }
  return list;
}

std::vector<PartitionOffset> from_list(const rd_kafka_topic_partition_list_t* list) {
  std::vector<PartitionOffset> out;
  out.reserve(static_cast<std::size_t>(list->cnt));
  for (int i = 0; i < list->cnt; ++i) {
    out.push_back({list->elems[i].topic, list->elems[i].partition, list->elems[i].offset});
  }
  return out;
}

// The first per-partition error of `list`, with the partition named; NO_ERROR if none.
Error partition_error(const rd_kafka_topic_partition_list_t* list) {
  for (int i = 0; i < list->cnt; ++i) {
    if (const rd_kafka_resp_err_t err = list->elems[i].err; err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Error::from_code(err, std::string(list->elems[i].topic) + " [" +
                                       std::to_string(list->elems[i].partition) +
                                       "]: " + rd_kafka_err2str(err));
    }
  }
  return {};
}

std::expected<void, Error> result_of(rd_kafka_resp_err_t err) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  return std::unexpected(Error::from_code(err));
}

}  // namespace

// ------------------------------------------------------------------------------------ message

Error Message::error() const {
  if (m_->err == RD_KAFKA_RESP_ERR_NO_ERROR) return {};
  Error e = Error::from_code(m_->err, rd_kafka_message_errstr(m_.get()));
  return e;
}

std::string_view Message::topic() const {
  return m_->rkt != nullptr ? std::string_view(rd_kafka_topic_name(m_->rkt)) : std::string_view();
}

std::optional<std::string_view> Message::key() const {
  if (m_->key == nullptr) return std::nullopt;
  return std::string_view(static_cast<const char*>(m_->key), m_->key_len);
}

std::optional<std::string_view> Message::value() const {
  if (m_->payload == nullptr) return std::nullopt;
  return std::string_view(static_cast<const char*>(m_->payload), m_->len);
}

std::int64_t Message::timestamp_ms() const {
  rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  return rd_kafka_message_timestamp(m_.get(), &type);
}

std::optional<std::string_view> Message::header(std::string_view name) const {
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(m_.get(), &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
  const std::string owned(name);
  const void* v = nullptr;
  std::size_t n = 0;
  if (rd_kafka_header_get_last(hdrs, owned.c_str(), &v, &n) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::nullopt;
  }
  if (v == nullptr) return std::string_view();
  return std::string_view(static_cast<const char*>(v), n);
}

// ----------------------------------------------------------------------------------- consumer

namespace {

using RebalanceFn = std::function<void(Rebalance, const std::vector<PartitionOffset>&)>;

// The on_rebalance of the consumer whose poll (or close) runs on this thread: librdkafka calls
// the rebalance callback only from inside rd_kafka_consumer_poll and rd_kafka_consumer_close
// (rdkafka.h, rd_kafka_conf_set_rebalance_cb), and the handle's opaque is its log name
// (client_conf), so the callback finds its consumer here.
thread_local const RebalanceFn* t_on_rebalance = nullptr;

struct CallingRebalance {
  explicit CallingRebalance(const RebalanceFn* fn) : saved(t_on_rebalance) { t_on_rebalance = fn; }
  ~CallingRebalance() { t_on_rebalance = saved; }
  CallingRebalance(const CallingRebalance&) = delete;
  CallingRebalance& operator=(const CallingRebalance&) = delete;
  const RebalanceFn* saved;
};

// rd_kafka_conf_set_rebalance_cb's callback (rdkafka.h's example rebalance_cb: assign on
// ASSIGN_PARTITIONS, unassign on REVOKE_PARTITIONS, the incremental calls with the COOPERATIVE
// protocol).
void rebalance_cb(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                  void* /*opaque: the log name*/) {
  const RebalanceFn* on_rebalance = t_on_rebalance;
  const bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    if (cooperative) {
      if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, parts)) rd_kafka_error_destroy(e);
    } else {
      rd_kafka_assign(rk, parts);
    }
    rd_kafka_pause_partitions(rk, parts);
    if (on_rebalance != nullptr) (*on_rebalance)(Rebalance::kAssigned, from_list(parts));
  } else {
    if (on_rebalance != nullptr) (*on_rebalance)(Rebalance::kRevoked, from_list(parts));
    if (cooperative) {
      if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, parts)) {
        rd_kafka_error_destroy(e);
      }
    } else {
      rd_kafka_assign(rk, nullptr);
    }
  }
}

}  // namespace

struct Consumer::State {
  std::string log_name;  // the handle's opaque (client_conf): declared before the handle
  std::function<void(Rebalance, const std::vector<PartitionOffset>&)> on_rebalance;
  detail::RkPtr rk;
  bool closed = false;
  ~State() {
    if (rk && !closed) rd_kafka_consumer_close(rk.get());
  }
};

Consumer::Consumer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Consumer::Consumer(Consumer&&) noexcept = default;
Consumer& Consumer::operator=(Consumer&&) noexcept = default;
Consumer::~Consumer() = default;

std::expected<Consumer, Error> Consumer::create(const config::KafkaConfig& cfg,
                                                const ConsumerOptions& options) {
  auto state = std::make_unique<State>();
  state->log_name = options.log_name;
  std::map<std::string, std::string> props = {
      {"isolation.level", options.read_committed ? "read_committed" : "read_uncommitted"},
      {"enable.partition.eof", options.partition_eof ? "true" : "false"},
      {"enable.auto.commit", "false"},
      {"allow.auto.create.topics", "false"},
  };
  if (!options.group_id.empty()) props["group.id"] = options.group_id;
  for (const auto& [k, v] : options.properties) props[k] = v;
  Error error;
  rd_kafka_conf_t* conf = detail::client_conf(cfg, props, &state->log_name, error);
  if (conf == nullptr) return std::unexpected(error);
  if (options.on_rebalance) {
    state->on_rebalance = options.on_rebalance;
    rd_kafka_conf_set_rebalance_cb(conf, &rebalance_cb);
  }
  char errstr[512];
  state->rk.reset(rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr));
  if (!state->rk) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(Error::from_code(
        RD_KAFKA_RESP_ERR__INVALID_ARG, std::string("cannot create a Kafka consumer: ") + errstr));
  }
  // Errors and other events of the main queue come through rd_kafka_consumer_poll (rdkafka.h
  // rd_kafka_poll_set_consumer), so one poll serves everything.
  rd_kafka_poll_set_consumer(state->rk.get());
  return Consumer(std::move(state));
}

rd_kafka_t* Consumer::handle() const {
  return state_->rk.get();
}

std::expected<void, Error> Consumer::subscribe(const std::vector<std::string>& topics) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const std::string& t : topics) {
    rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  return result_of(rd_kafka_subscribe(state_->rk.get(), list.get()));
}

std::expected<void, Error> Consumer::assign(const std::vector<PartitionOffset>& partitions) {
  return result_of(rd_kafka_assign(state_->rk.get(), to_list(partitions).get()));
}

std::expected<void, Error> Consumer::unassign() {
  return result_of(rd_kafka_assign(state_->rk.get(), nullptr));
}

std::expected<void, Error> Consumer::seek(const std::vector<PartitionOffset>& offsets,
                                          std::chrono::milliseconds timeout) {
  ListPtr list = to_list(offsets);
  if (rd_kafka_error_t* e = rd_kafka_seek_partitions(state_->rk.get(), list.get(), ms(timeout))) {
    Error error = Error::from(e);
    rd_kafka_error_destroy(e);
    return std::unexpected(error);
  }
  if (Error e = partition_error(list.get()); !e.ok()) return std::unexpected(e);
  return {};
}

std::expected<void, Error> Consumer::pause(const std::vector<PartitionOffset>& partitions) {
  ListPtr list = to_list(partitions);
  if (const rd_kafka_resp_err_t err = rd_kafka_pause_partitions(state_->rk.get(), list.get());
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(Error::from_code(err));
  }
  if (Error e = partition_error(list.get()); !e.ok()) return std::unexpected(e);
  return {};
}

std::expected<void, Error> Consumer::resume(const std::vector<PartitionOffset>& partitions) {
  ListPtr list = to_list(partitions);
  if (const rd_kafka_resp_err_t err = rd_kafka_resume_partitions(state_->rk.get(), list.get());
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(Error::from_code(err));
  }
  if (Error e = partition_error(list.get()); !e.ok()) return std::unexpected(e);
  return {};
}

std::optional<Message> Consumer::poll(std::chrono::milliseconds timeout) {
  const CallingRebalance calling(state_->on_rebalance ? &state_->on_rebalance : nullptr);
  rd_kafka_message_t* m = rd_kafka_consumer_poll(state_->rk.get(), ms(timeout));
  if (m == nullptr) return std::nullopt;
  return Message(m);
}

std::expected<Watermarks, Error> Consumer::watermarks(const std::string& topic,
                                                      std::int32_t partition,
                                                      std::chrono::milliseconds timeout) {
  Watermarks w;
  const rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
      state_->rk.get(), topic.c_str(), partition, &w.low, &w.high, std::max(1, ms(timeout)));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(Error::from_code(err));
  return w;
}

std::expected<std::vector<PartitionOffset>, Error> Consumer::offsets_for_time(
    const std::string& topic, const std::vector<std::int32_t>& partitions,
    std::int64_t timestamp_ms, std::chrono::milliseconds timeout) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  for (const std::int32_t p : partitions) {
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset = timestamp_ms;
  }
  if (const rd_kafka_resp_err_t err =
          rd_kafka_offsets_for_times(state_->rk.get(), list.get(), std::max(1, ms(timeout)));
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(Error::from_code(err));
  }
  if (Error e = partition_error(list.get()); !e.ok()) return std::unexpected(e);
  std::vector<PartitionOffset> out = from_list(list.get());
  // No record at or after the timestamp: ListOffsets answers -1, i.e. the end.
  for (PartitionOffset& o : out) {
    if (o.offset < 0) o.offset = kOffsetEnd;
  }
  return out;
}

std::expected<TopicDescription, Error> Consumer::describe_topic(const std::string& topic,
                                                                std::chrono::milliseconds timeout) {
  return detail::describe_topic(state_->rk.get(), topic, timeout);
}

std::expected<void, Error> Consumer::commit(const std::vector<PartitionOffset>& offsets,
                                            std::chrono::milliseconds timeout) {
  ListPtr list = to_list(offsets);
  rd_kafka_queue_t* queue = rd_kafka_queue_new(state_->rk.get());
  const rd_kafka_resp_err_t err =
      rd_kafka_commit_queue(state_->rk.get(), list.get(), queue, nullptr, nullptr);
  std::expected<void, Error> result;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = std::unexpected(Error::from_code(err));
  } else if (rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, ms(timeout)); ev == nullptr) {
    result = std::unexpected(Error::from_code(RD_KAFKA_RESP_ERR__TIMED_OUT));
  } else {
    if (const rd_kafka_resp_err_t e = rd_kafka_event_error(ev); e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = std::unexpected(Error::from_code(e, rd_kafka_event_error_string(ev)));
    } else if (const rd_kafka_topic_partition_list_t* done =
                   rd_kafka_event_topic_partition_list(ev);
               done != nullptr) {
      if (Error pe = partition_error(done); !pe.ok()) result = std::unexpected(pe);
    }
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(queue);
  return result;
}

std::expected<void, Error> Consumer::commit_async(const std::vector<PartitionOffset>& offsets) {
  return result_of(rd_kafka_commit(state_->rk.get(), to_list(offsets).get(), 1));
}

std::expected<std::vector<PartitionOffset>, Error> Consumer::committed(
    const std::vector<PartitionOffset>& partitions, std::chrono::milliseconds timeout) {
  ListPtr list = to_list(partitions);
  if (const rd_kafka_resp_err_t err =
          rd_kafka_committed(state_->rk.get(), list.get(), std::max(1, ms(timeout)));
      err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return std::unexpected(Error::from_code(err));
  }
  if (Error e = partition_error(list.get()); !e.ok()) return std::unexpected(e);
  return from_list(list.get());
}

void Consumer::close() {
  if (!state_ || !state_->rk || state_->closed) return;
  state_->closed = true;
  const CallingRebalance calling(state_->on_rebalance ? &state_->on_rebalance : nullptr);
  rd_kafka_consumer_close(state_->rk.get());
}

}  // namespace walrelay::kafka
