#include "metadata.hpp"

#include <algorithm>

namespace walrelay::kafka::detail {

std::expected<TopicDescription, Error> describe_topic(rd_kafka_t* rk, const std::string& topic,
                                                      std::chrono::milliseconds timeout) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  if (rkt == nullptr) return std::unexpected(Error::from_code(rd_kafka_last_error()));
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, 0, rkt, &md, static_cast<int>(std::max<long long>(1, timeout.count())));
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return std::unexpected(Error::from_code(err));
  TopicDescription d;
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (topic != md->topics[i].topic) continue;
    if (md->topics[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      d.error = Error::from_code(md->topics[i].err);
    }
    for (int p = 0; p < md->topics[i].partition_cnt; ++p) {
      d.partitions.push_back(md->topics[i].partitions[p].id);
    }
  }
  rd_kafka_metadata_destroy(md);
  return d;
}

}  // namespace walrelay::kafka::detail
