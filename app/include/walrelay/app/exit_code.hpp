#pragma once

namespace walrelay {

/// Process exit codes (README.md "Exit codes"), chosen by the app layer alone
/// (app/supervisor.hpp): a system reports one as its end.
enum class ExitCode : int {
  kOk = 0,                   ///< stopped by SIGINT/SIGTERM after flushing and confirming
  kRuntimeError = 1,         ///< a failure retrying cannot help (authentication, wal_level, ...)
  kConfigError = 2,          ///< the configuration is invalid; nothing was started
  kDeliveryFailed = 3,       ///< a record could not be delivered to Kafka for good
  kMappingFailed = 4,        ///< a change could not be decoded or mapped (errors.policy=fail)
  kSlotLost = 5,             ///< the slot's stream may have lost changes (dropped, invalidated,
                             ///< failover past the fork point); needs source.allow_slot_reset
  kRepeatedServerError = 6,  ///< the server failed the same way at the same LSN
                             ///< source.max_repeated_errors times (e.g. an undecodable change)
  kKafkaAuthFailed = 7,      ///< Kafka refused walrelay's credentials (SASL/TLS authentication)
  kFenced = 8,  ///< delivery exactly_once: another instance with the same transactional.id took
                ///< over (KIP-98 fencing, librdkafka ERR__FENCED / PRODUCER_FENCED)
  /// `walrelay reconcile` (docs/reconcile.md): breaks were found. Same number as kRuntimeError,
  /// which reconcile never returns (a failure to read is kReadFailed).
  kBreaksFound = 1,
  /// `walrelay reconcile`: a side (PostgreSQL or Kafka) could not be read, so nothing can be said
  /// about breaks: no answer, a refused query, the replication slot missing.
  kReadFailed = 9,
};

}  // namespace walrelay
