#include "walrelay/sink/publish_metrics.hpp"

namespace walrelay::sink {

void PublishMetrics::on_acknowledged(std::string_view topic, std::string_view op,
                                     std::size_t bytes) {
  // Consecutive reports mostly share topic and op: map nodes never move, so the last counter is
  // reused while the topic name pointer and op are the same.
  if (topic.data() != last_.topic || op != last_.op || last_.count == nullptr) {
    key_.assign(topic);
    key_.push_back('\0');
    key_.append(op);
    auto it = by_topic_.find(key_);
    if (it == by_topic_.end()) it = by_topic_.emplace(key_, 0).first;
    last_.topic = topic.data();
    last_.op.assign(op);
    last_.count = &it->second;
  }
  ++*last_.count;
  bytes_ += bytes;
}

void PublishMetrics::on_failed(rd_kafka_resp_err_t err) {
  if (err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) return;
  ++errors_;
}

void PublishMetrics::for_each_published(
    const std::function<void(std::string_view, std::string_view, std::uint64_t)>& f) const {
  for (const auto& [key, n] : by_topic_) {
    const auto nul = key.find('\0');
    const std::string_view k(key);
    f(k.substr(0, nul), k.substr(nul + 1), n);
  }
}

}  // namespace walrelay::sink
