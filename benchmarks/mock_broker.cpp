// A librdkafka mock cluster as a process of its own, for benchmarks that must measure walrelay
// without a JVM broker sharing the CPU in the same way (issue "Performance": "a librdkafka mock
// cluster running as a separate process").
//
//   mock_broker [--brokers N] [--partitions N] [--topic NAME]...
//
// Prints the cluster's bootstrap.servers (host:port list) as the first line of stdout, then runs
// until SIGINT or SIGTERM. Each `--topic` is created with `--partitions` partitions (default 3,
// like the test broker); other topics are created on first use with the mock cluster's default
// (4 partitions in librdkafka 2.0). The mock cluster keeps every
// message in memory: size the benchmark accordingly (about the bytes produced). Not a product
// component: benchmarks only; fault injection in tests uses the mock cluster in-process.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

int usage() {
  std::fprintf(stderr, "usage: mock_broker [--brokers N] [--partitions N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int brokers = 1;
  int partitions = 3;
  std::vector<std::string> topics;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    if (arg == "--brokers") {
      brokers = std::atoi(argv[++i]);
    } else if (arg == "--partitions") {
      partitions = std::atoi(argv[++i]);
    } else if (arg == "--topic") {
      topics.emplace_back(argv[++i]);
    } else {
      return usage();
    }
  }
  if (brokers < 1 || partitions < 1) return usage();

  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);  // no CONFWARN about bootstrap
  // The handle only hosts the cluster (librdkafka needs one for its bookkeeping).
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == nullptr) {
    std::fprintf(stderr, "mock_broker: %s\n", err);
    return 1;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(rk, brokers);
  if (cluster == nullptr) {
    std::fprintf(stderr, "mock_broker: cannot create the mock cluster\n");
    return 1;
  }
  for (const std::string& topic : topics) {
    const rd_kafka_resp_err_t e = rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "mock_broker: topic %s: %s\n", topic.c_str(), rd_kafka_err2str(e));
      return 1;
    }
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("%s\n", rd_kafka_mock_cluster_bootstraps(cluster));
  std::fflush(stdout);
  while (g_stop == 0) pause();

  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(rk);
  return 0;
}
