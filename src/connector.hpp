#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "catalog.hpp"
#include "exit_code.hpp"
#include "replication/replication_stream.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/decoder/wal2json_decoder.hpp"
#include "walrelay/router/event_router.hpp"
#include "walrelay/sink/ack_tracker.hpp"
#include "walrelay/sink/kafka_producer.hpp"

namespace walrelay {

/// Wires the data path on one io_context (architecture.md):
/// ReplicationStream → Wal2JsonDecoder → EventRouter → KafkaProducer, and delivery reports →
/// AckTracker → flush LSN → standby status updates. Owns every piece; single-threaded.
class Connector {
 public:
  Connector(boost::asio::io_context& io, config::Config cfg);
  ~Connector();

  /// Connects, prepares the slot, streams until a signal or a failure, and returns the exit code.
  ExitCode run();

 private:
  bool prepare();
  void on_xlogdata(const replication::XLogData& x);
  void on_keepalive(const replication::Keepalive& k);
  void on_stream_end(replication::StreamEnd how, const std::string& reason);
  void on_delivery(const sink::DeliveryReport& r);
  void send_status(bool reply_requested);
  void schedule_status();
  void schedule_progress();
  /// Publishes the rest of the current change's records; false when it had to stop (queue full:
  /// the stream is paused and the rest is published on the next delivery report; or a failure).
  bool publish_pending();
  void apply_backpressure();
  void shutdown(ExitCode code);
  void fail_mapping(const std::string& reason);

  boost::asio::io_context& io_;
  config::Config cfg_;
  replication::ReplicationStream stream_;
  decoder::Wal2JsonDecoder decoder_;
  router::TypeRegistry types_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<router::EventRouter> router_;
  std::unique_ptr<sink::KafkaProducer> producer_;
  sink::AckTracker tracker_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer progress_timer_;
  boost::asio::signal_set signals_;

  replication::SystemInfo system_;
  Lsn start_lsn_;       // the slot's confirmed_flush_lsn at start
  Lsn received_lsn_;    // newest WAL position received (write LSN)
  Lsn server_wal_end_;  // newest server WAL end seen in a keepalive
  Lsn last_sent_flush_;
  // Records of the current change (or COMMIT) not yet handed to Kafka, and what completes it.
  enum class AfterPublish : std::uint8_t { kChange, kStandalone, kCommit };
  std::span<const Record> pending_;
  std::size_t pending_next_ = 0;
  AfterPublish pending_after_ = AfterPublish::kChange;
  Lsn pending_lsn_;
  bool in_txn_ = false;
  bool stopping_ = false;
  std::optional<ExitCode> exit_code_;
  ExitCode prepare_exit_ = ExitCode::kRuntimeError;

  std::uint64_t events_total_ = 0;
  std::uint64_t events_at_last_progress_ = 0;
  std::chrono::steady_clock::time_point last_progress_;
  std::vector<std::pair<std::string, std::string>> plugin_options_;
};

}  // namespace walrelay
