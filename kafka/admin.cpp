#include "walrelay/kafka/admin.hpp"

#include <algorithm>
#include <cstdint>

#include "client_config.hpp"
#include "metadata.hpp"

namespace walrelay::kafka {

struct TopicAdmin::State {
  std::string log_name;  // the handle's opaque (client_conf): declared before the handle
  detail::RkPtr rk;
  rd_kafka_queue_t* queue = nullptr;
  bool creating = false;
  std::uintptr_t request = 0;  // the request in flight (its admin opaque): a late answer to an
                               // abandoned one is told apart
  std::chrono::steady_clock::time_point deadline;
  ~State() {
    if (queue != nullptr) rd_kafka_queue_destroy(queue);
  }
};

TopicAdmin::TopicAdmin(std::unique_ptr<State> state) : state_(std::move(state)) {}
TopicAdmin::TopicAdmin(TopicAdmin&&) noexcept = default;
TopicAdmin& TopicAdmin::operator=(TopicAdmin&&) noexcept = default;
TopicAdmin::~TopicAdmin() = default;

std::expected<TopicAdmin, Error> TopicAdmin::connect(const config::KafkaConfig& cfg,
                                                     const std::string& log_name) {
  auto state = std::make_unique<State>();
  state->log_name = log_name;
  Error error;
  // `describe` must not create the topic it asks about (the producer default is true).
  rd_kafka_conf_t* conf =
      detail::client_conf(cfg, {{"allow.auto.create.topics", "false"}}, &state->log_name, error);
  if (conf == nullptr) return std::unexpected(error);
  char errstr[512];
  state->rk.reset(rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr));
  if (!state->rk) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(
        Error::from_code(RD_KAFKA_RESP_ERR__INVALID_ARG,
                         std::string("cannot create a Kafka admin client: ") + errstr));
  }
  state->queue = rd_kafka_queue_new(state->rk.get());
  return TopicAdmin(std::move(state));
}

bool TopicAdmin::creating() const {
  return state_->creating;
}

std::expected<void, Error> TopicAdmin::create(const NewTopic& topic,
                                              std::chrono::milliseconds timeout) {
  if (state_->creating) {
    return std::unexpected(
        Error::from_code(RD_KAFKA_RESP_ERR__STATE, "a topic creation is in flight already"));
  }
  char errstr[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.name.c_str(), topic.partitions,
                                                  topic.replication_factor, errstr, sizeof errstr);
  if (nt == nullptr) {
    return std::unexpected(Error::from_code(RD_KAFKA_RESP_ERR__INVALID_ARG, errstr));
  }
  for (const auto& [name, value] : topic.configs) {
    if (const rd_kafka_resp_err_t err =
            rd_kafka_NewTopic_set_config(nt, name.c_str(), value.c_str());
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_NewTopic_destroy(nt);
      return std::unexpected(
          Error::from_code(err, "topic config " + name + ": " + rd_kafka_err2str(err)));
    }
  }
  rd_kafka_AdminOptions_t* opts =
      rd_kafka_AdminOptions_new(state_->rk.get(), RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(opts, static_cast<int>(timeout.count()), errstr,
                                            sizeof errstr);
  rd_kafka_AdminOptions_set_opaque(opts, reinterpret_cast<void*>(++state_->request));
  rd_kafka_CreateTopics(state_->rk.get(), &nt, 1, opts, state_->queue);
  rd_kafka_AdminOptions_destroy(opts);
  rd_kafka_NewTopic_destroy(nt);
  state_->creating = true;
  state_->deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(1);
  return {};
}

std::optional<std::expected<CreateOutcome, Error>> TopicAdmin::poll(
    std::chrono::milliseconds wait) {
  State& s = *state_;
  if (!s.creating) {
    return std::unexpected(Error::from_code(RD_KAFKA_RESP_ERR__STATE, "no topic creation"));
  }
  const auto now = std::chrono::steady_clock::now();
  const auto left =
      std::max(std::chrono::milliseconds(0),
               std::chrono::duration_cast<std::chrono::milliseconds>(s.deadline - now));
  rd_kafka_event_t* ev =
      rd_kafka_queue_poll(s.queue, static_cast<int>(std::min(wait, left).count()));
  if (ev == nullptr) {
    if (std::chrono::steady_clock::now() < s.deadline) return std::nullopt;
    // Abandoned: an answer that still comes is dropped with the queue's next events.
    s.creating = false;
    return std::unexpected(
        Error::from_code(RD_KAFKA_RESP_ERR__TIMED_OUT, "no answer from Kafka within the timeout"));
  }
  if (reinterpret_cast<std::uintptr_t>(rd_kafka_event_opaque(ev)) != s.request) {
    rd_kafka_event_destroy(ev);  // the answer to an abandoned request
    return std::nullopt;
  }
  s.creating = false;
  std::expected<CreateOutcome, Error> result =
      std::unexpected(Error::from_code(RD_KAFKA_RESP_ERR__FAIL, "an unexpected answer from Kafka"));
  if (const rd_kafka_resp_err_t request_err = rd_kafka_event_error(ev);
      request_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = std::unexpected(Error::from_code(request_err, rd_kafka_event_error_string(ev)));
  } else if (const rd_kafka_CreateTopics_result_t* res = rd_kafka_event_CreateTopics_result(ev);
             res != nullptr) {
    std::size_t n = 0;
    const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(res, &n);
    const rd_kafka_resp_err_t err =
        n == 1 ? rd_kafka_topic_result_error(topics[0]) : RD_KAFKA_RESP_ERR__FAIL;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      result = CreateOutcome::kCreated;
    } else if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      result = CreateOutcome::kExists;
    } else {
      const char* text = n == 1 ? rd_kafka_topic_result_error_string(topics[0]) : nullptr;
      result = std::unexpected(
          Error::from_code(err, std::string(rd_kafka_err2str(err)) +
                                    (text != nullptr ? std::string(": ") + text : std::string())));
    }
  }
  rd_kafka_event_destroy(ev);
  return result;
}

std::expected<TopicDescription, Error> TopicAdmin::describe(const std::string& topic,
                                                            std::chrono::milliseconds timeout) {
  return detail::describe_topic(state_->rk.get(), topic, timeout);
}

std::expected<CreateOutcome, Error> create_topic(TopicAdmin& admin, const NewTopic& topic,
                                                 std::chrono::milliseconds timeout) {
  if (auto sent = admin.create(topic, timeout); !sent) return std::unexpected(sent.error());
  for (;;) {
    if (auto done = admin.poll(std::chrono::milliseconds(1000))) return *done;
  }
}

}  // namespace walrelay::kafka
