#pragma once

// The librdkafka mock cluster the component tests run against: standalone (created from a separate
// dummy rd_kafka_t that never connects anywhere), reached by the code under test through
// `bootstrap.servers`, exactly as it would reach a real cluster.

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <string>

namespace walrelay::component_test {

/// Base fixture: SetUp creates a 3-broker mock cluster (mcluster_, its bootstrap servers in
/// bootstraps_); TearDown destroys it. A derived fixture calls MockClusterFixture::SetUp() first
/// and MockClusterFixture::TearDown() last, after whatever connects to the cluster is gone.
class MockClusterFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char errstr[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    // The dummy handle only hosts the mock cluster; it never connects anywhere.
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
    mock_rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    ASSERT_NE(mock_rk_, nullptr) << errstr;
    mcluster_ = rd_kafka_mock_cluster_new(mock_rk_, 3);
    ASSERT_NE(mcluster_, nullptr);
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(mcluster_);
  }

  void TearDown() override {
    if (mcluster_ != nullptr) rd_kafka_mock_cluster_destroy(mcluster_);
    mcluster_ = nullptr;
    if (mock_rk_ != nullptr) rd_kafka_destroy(mock_rk_);
    mock_rk_ = nullptr;
  }

  /// Creates `topic` on the mock cluster (replication factor 1).
  void create_topic(const std::string& topic, int partitions) {
    ASSERT_EQ(rd_kafka_mock_topic_create(mcluster_, topic.c_str(), partitions, 1),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }

  rd_kafka_t* mock_rk_ = nullptr;
  rd_kafka_mock_cluster_t* mcluster_ = nullptr;
  std::string bootstraps_;
};

}  // namespace walrelay::component_test
