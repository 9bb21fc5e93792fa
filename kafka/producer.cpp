#include "walrelay/kafka/producer.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "walrelay/core/headers.hpp"
#include "walrelay/kafka/security.hpp"

namespace walrelay::kafka {

namespace asio = boost::asio;

bool is_permanent_failure(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return false;
    // With message.timeout.ms=0 librdkafka retries retriable errors itself; anything that reaches
    // a delivery report is final for that message. Listed here are the ones that are final by
    // nature, so they are reported as such whatever the timeout setting.
    default:
      return true;
  }
}

SecretRedactor::SecretRedactor(const std::map<std::string, std::string>& properties) {
  for (const auto& [name, value] : properties) {
    if (config::is_secret_property(name) && !value.empty()) values_.push_back(value);
  }
  // Longest first, so a secret containing another is replaced whole.
  std::sort(values_.begin(), values_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string SecretRedactor::redact(std::string_view text) const {
  std::string out(text);
  for (const auto& v : values_) {
    for (std::size_t pos = out.find(v); pos != std::string::npos; pos = out.find(v, pos + 4)) {
      out.replace(pos, v.size(), "****");
    }
  }
  return out;
}

namespace {

// Sets every property on `conf`; returns "" or one line per property librdkafka rejected, with
// its reason (secret values blanked), so every bad key is reported at once.
std::string apply_properties(rd_kafka_conf_t* conf, const std::map<std::string, std::string>& props,
                             const SecretRedactor& redactor) {
  std::string rejected;
  char errstr[512];
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
      if (!rejected.empty()) rejected += "\n";
      rejected += "kafka.properties." + k + ": " + redactor.redact(errstr);
    }
  }
  return rejected;
}

void log_redacted(const SecretRedactor& redactor, int level, const char* fac, const char* buf) {
  const auto lvl = level <= 3   ? spdlog::level::err
                   : level <= 4 ? spdlog::level::warn
                   : level <= 6 ? spdlog::level::info
                                : spdlog::level::debug;
  spdlog::log(lvl, "librdkafka {}: {}", fac, redactor.redact(buf));
}

}  // namespace

std::map<std::string, std::string> effective_producer_properties(const config::KafkaConfig& cfg,
                                                                 const std::string& client_id) {
  // librdkafka's own queue limits are set above walrelay's in-flight bounds so that the connector's
  // backpressure (stop reading the slot) acts first and producev() never sees QUEUE_FULL.
  const std::size_t max_msgs =
      std::min<std::size_t>(cfg.max_in_flight_events * 2 + 1000, 2'000'000'000);
  const std::size_t max_kb =
      std::min<std::size_t>((cfg.max_in_flight_bytes / 1024) * 2 + 65536, 2'000'000'000);
  std::map<std::string, std::string> props = {
      {"bootstrap.servers", cfg.bootstrap_servers},
      {"client.id", client_id},
      {"enable.idempotence", "true"},
      {"acks", "all"},
      {"partitioner", "murmur2_random"},
      {"message.timeout.ms", "0"},
      // lz4: with librdkafka 2.0 an uncompressed batch costs its broker thread about five times
      // the CPU of an lz4 one (benchmarks/RESULTS.md), and JSON envelopes compress well.
      {"compression.type", "lz4"},
      {"queue.buffering.max.messages", std::to_string(max_msgs)},
      {"queue.buffering.max.kbytes", std::to_string(max_kb)},
  };
  for (const auto& [k, v] : cfg.properties) props[k] = v;
  return props;
}

Producer::Producer(asio::any_io_executor executor, const config::KafkaConfig& cfg,
                   const std::string& client_id, DeliveryHandler on_delivery, FatalHandler on_fatal)
    : on_delivery_(std::move(on_delivery)),
      on_fatal_(std::move(on_fatal)),
      redactor_(cfg.properties) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (auto rejected =
          apply_properties(conf, effective_producer_properties(cfg, client_id), redactor_);
      !rejected.empty()) {
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error(rejected);
  }
  rd_kafka_conf_set_dr_msg_cb(conf, &Producer::on_dr);
  rd_kafka_conf_set_error_cb(conf, &Producer::on_error);
  // librdkafka's own log lines go through spdlog (its default prints to stderr in its own format),
  // with secret property values blanked (librdkafka quotes values in some warnings). Called from
  // librdkafka's threads: the spdlog logger is thread-safe and the redactor immutable.
  rd_kafka_conf_set_log_cb(
      conf, [](const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
        // A broker connection failure ("FAIL") also reaches error_cb (on_error), which logs it
        // once, rate-limited: not twice.
        if (std::string_view(fac) == "FAIL") return;
        log_redacted(static_cast<const Producer*>(rd_kafka_opaque(rk))->redactor_, level, fac, buf);
      });
  rd_kafka_conf_set_opaque(conf, this);
  rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (rk_ == nullptr) {
    // rd_kafka_new took ownership of conf only on success.
    rd_kafka_conf_destroy(conf);
    throw std::runtime_error("cannot create Kafka producer: " + redactor_.redact(errstr));
  }
  main_queue_ = rd_kafka_queue_get_main(rk_);
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  pipe_read_ = fds[0];
  pipe_write_ = fds[1];
  // librdkafka writes "1" to the pipe when the main queue (delivery reports, errors) goes from
  // empty to non-empty (rdkafka.h, rd_kafka_queue_io_event_enable).
  rd_kafka_queue_io_event_enable(main_queue_, pipe_write_, "1", 1);
  watcher_ = std::make_unique<asio::posix::stream_descriptor>(executor, pipe_read_);
}

Producer::~Producer() {
  stop();
  for (auto& [name, rkt] : topics_) rd_kafka_topic_destroy(rkt);
  if (main_queue_ != nullptr) {
    rd_kafka_queue_io_event_enable(main_queue_, -1, nullptr, 0);
    rd_kafka_queue_destroy(main_queue_);
  }
  if (rk_ != nullptr) rd_kafka_destroy(rk_);
  if (watcher_) {
    watcher_->close();
  } else if (pipe_read_ >= 0) {
    ::close(pipe_read_);
  }
  if (pipe_write_ >= 0) ::close(pipe_write_);
}

void Producer::start() {
  stopped_ = false;
  poll();  // anything queued before the watcher existed
  arm();
}

void Producer::stop() {
  stopped_ = true;
  if (watcher_) {
    boost::system::error_code ec;
    watcher_->cancel(ec);
  }
}

void Producer::arm() {
  if (stopped_) return;
  watcher_->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired() || ec || stopped_) return;
        char drain[64];
        while (::read(pipe_read_, drain, sizeof drain) > 0) {
        }
        poll();
        arm();
      });
}

void Producer::poll() {
  // Each call serves all events queued at the time; loop until the queue is empty so that no
  // report waits for the next pipe write (which only comes on an empty → non-empty transition).
  while (rd_kafka_poll(rk_, 0) > 0) {
  }
}

int Producer::flush(std::chrono::milliseconds timeout) {
  rd_kafka_flush(rk_, static_cast<int>(timeout.count()));
  poll();
  return rd_kafka_outq_len(rk_);
}

void Producer::purge() {
  rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  poll();
}

std::expected<int, ProbeError> probe_brokers(const config::KafkaConfig& cfg,
                                             std::chrono::milliseconds timeout) {
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  // The callbacks' opaque: the redactor for log lines, the first security failure error_cb saw.
  struct Probe {
    SecretRedactor redactor;
    rd_kafka_resp_err_t security_err = RD_KAFKA_RESP_ERR_NO_ERROR;
    std::string security_reason;
  } probe{SecretRedactor(cfg.properties), RD_KAFKA_RESP_ERR_NO_ERROR, {}};
  const SecretRedactor& redactor = probe.redactor;
  if (auto rejected =
          apply_properties(conf, effective_producer_properties(cfg, "walrelay-check"), redactor);
      !rejected.empty()) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(ProbeError{true, rejected});
  }
  rd_kafka_conf_set_opaque(conf, &probe);
  rd_kafka_conf_set_log_cb(
      conf, [](const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
        log_redacted(static_cast<const Probe*>(rd_kafka_opaque(rk))->redactor, level, fac, buf);
      });
  rd_kafka_conf_set_error_cb(conf, [](rd_kafka_t* /*rk*/, int err, const char* reason, void* op) {
    auto* p = static_cast<Probe*>(op);
    const auto code = static_cast<rd_kafka_resp_err_t>(err);
    if (p->security_err == RD_KAFKA_RESP_ERR_NO_ERROR &&
        security_failure(code) != SecurityFailure::kNone) {
      p->security_err = code;
      p->security_reason = std::string(rd_kafka_err2name(code)) + ": " + p->redactor.redact(reason);
    }
  });
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return std::unexpected(
        ProbeError{true, "cannot create Kafka producer: " + redactor.redact(errstr)});
  }
  // Metadata requests of up to 250 ms, serving error_cb (rd_kafka_poll) in between: a refused
  // password or an unverifiable certificate ends the probe at once instead of after `timeout`.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    err = rd_kafka_metadata(rk, 0, nullptr, &md,
                            static_cast<int>(std::min<long long>(250, left.count())));
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
    rd_kafka_poll(rk, 0);
    if (probe.security_err != RD_KAFKA_RESP_ERR_NO_ERROR) break;
  }
  std::expected<int, ProbeError> result =
      std::unexpected(ProbeError{false, std::string(rd_kafka_err2str(err)), err});
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = md->broker_cnt;
    rd_kafka_metadata_destroy(md);
  } else if (probe.security_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    result = std::unexpected(ProbeError{false, probe.security_reason, probe.security_err});
  }
  rd_kafka_destroy(rk);
  return result;
}

int Producer::outstanding() const {
  return rd_kafka_outq_len(rk_);
}

rd_kafka_topic_t* Producer::topic_handle(std::string_view name) {
  // Consecutive records mostly go to one topic: a comparison instead of hashing the name.
  if (last_topic_ != nullptr && name == last_topic_name_) return last_topic_;
  rd_kafka_topic_t* rkt = nullptr;
  if (auto it = topics_.find(name); it != topics_.end()) {
    rkt = it->second;
    last_topic_name_ = it->first;
  } else {
    std::string owned(name);
    rkt = rd_kafka_topic_new(rk_, owned.c_str(), nullptr);
    if (rkt == nullptr) return nullptr;
    last_topic_name_ = topics_.emplace(std::move(owned), rkt).first->first;
  }
  last_topic_ = rkt;
  return rkt;
}

rd_kafka_resp_err_t Producer::produce(const Record& record, std::uint64_t opaque) {
  rd_kafka_topic_t* rkt = topic_handle(record.topic);
  if (rkt == nullptr) return rd_kafka_last_error();
  rd_kafka_headers_t* hdrs = nullptr;
  if (!record.headers.empty()) {
    hdrs = rd_kafka_headers_new(record.headers.size());
    for (const auto& h : record.headers) {
      rd_kafka_header_add(hdrs, h.name.data(), static_cast<ssize_t>(h.name.size()), h.value.data(),
                          static_cast<ssize_t>(h.value.size()));
    }
  }
  void* value_ptr = record.value ? const_cast<char*>(record.value->data()) : nullptr;
  const std::size_t value_len = record.value ? record.value->size() : 0;
  void* key_ptr = record.key ? const_cast<char*>(record.key->data()) : nullptr;
  const std::size_t key_len = record.key ? record.key->size() : 0;
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      rk_, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_VALUE(value_ptr, value_len), RD_KAFKA_V_KEY(key_ptr, key_len),
      RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_TIMESTAMP(record.timestamp_ms),
      RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::uintptr_t>(opaque))),
      RD_KAFKA_V_END);
  // On failure the headers were not taken over by librdkafka (rdkafka.h, rd_kafka_producev).
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && hdrs != nullptr) rd_kafka_headers_destroy(hdrs);
  return err;
}

void Producer::on_dr(rd_kafka_t* /*rk*/, const rd_kafka_message_t* msg, void* opaque) {
  auto* self = static_cast<Producer*>(opaque);
  DeliveryReport r;
  r.opaque = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(msg->_private));
  r.bytes = msg->len + msg->key_len;
  r.err = msg->err;
  r.topic = msg->rkt != nullptr ? std::string_view(rd_kafka_topic_name(msg->rkt)) : "";
  if (msg->key != nullptr) {
    r.key = std::string_view(static_cast<const char*>(msg->key), msg->key_len);
    r.has_key = true;
  }
  if (msg->payload != nullptr) {
    r.value = std::string_view(static_cast<const char*>(msg->payload), msg->len);
    r.has_value = true;
  }
  // The `id` header, for logs and dead-letter records of failed deliveries only (a lookup per
  // successful report would be wasted work; rd_kafka_message_headers needs a non-const message,
  // it only reads it here).
  rd_kafka_headers_t* hdrs = nullptr;
  if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR &&
      rd_kafka_message_headers(const_cast<rd_kafka_message_t*>(msg), &hdrs) ==
          RD_KAFKA_RESP_ERR_NO_ERROR) {
    const void* v = nullptr;
    std::size_t n = 0;
    if (rd_kafka_header_get_last(hdrs, header::kId, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        v != nullptr) {
      r.event_id = std::string_view(static_cast<const char*>(v), n);
    }
  }
  r.partition = msg->partition;
  r.offset = msg->offset;
  self->on_delivery_(r);
}

void Producer::on_error(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto* self = static_cast<Producer*>(opaque);
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    Error fatal = Error::fatal_of(rk);
    if (fatal.ok()) fatal = Error::from_code(RD_KAFKA_RESP_ERR__FATAL, reason);  // no original
    fatal.message = self->redactor_.redact(fatal.message);
    self->on_fatal_(fatal);
    return;
  }
  // Other errors are informational: librdkafka recovers by itself (brokers down, timeouts). They
  // repeat on every reconnect attempt during an outage: the same text at most every 30 s.
  std::string text = self->redactor_.redact(reason);
  if (const Error error = Error::from_code(static_cast<rd_kafka_resp_err_t>(err), text);
      security_failure(error) != SecurityFailure::kNone) {
    // Credentials or the SASL/TLS setup are wrong: retrying cannot help, a person must act.
    self->on_fatal_(error);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (text == self->last_error_ && now - self->last_error_at_ < std::chrono::seconds(30)) return;
  self->last_error_ = text;
  self->last_error_at_ = now;
  spdlog::warn("kafka: {} ({})", text, rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err)));
}

}  // namespace walrelay::kafka
