#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

#include "walrelay/app/allocator.hpp"
#include "walrelay/app/exit_code.hpp"
#include "walrelay/app/json_log_formatter.hpp"
#include "walrelay/app/metrics/probe.hpp"
#include "walrelay/commands/check.hpp"
#include "walrelay/commands/slot_command.hpp"
#include "walrelay/commands/snapshot_command.hpp"
#include "walrelay/commands/tail_command.hpp"
#include "walrelay/config/config.hpp"
#include "walrelay/config/inbox_load.hpp"
#include "walrelay/connector/connector.hpp"
#include "walrelay/inbox/inbox.hpp"
#include "walrelay/inbox/redrive.hpp"
#include "walrelay/inbox/status.hpp"
#include "walrelay/reconcile/command.hpp"
#include "walrelay/relay/check.hpp"
#include "walrelay/relay/outbox_command.hpp"
#include "walrelay/relay/relay.hpp"
#include "walrelay/snapshot/send_signal.hpp"

namespace {

// Loads the configuration or prints every error (key and reason) and returns nullopt.
std::optional<walrelay::config::Config> load_or_report(
    const std::string& path, walrelay::config::LoadResult (*load)(const std::string&) =
                                 &walrelay::config::load_config_file) {
  auto result = load(path);
  if (!result.errors.empty()) {
    std::cerr << "walrelay: invalid configuration " << path << ":\n";
    for (const auto& e : result.errors) {
      std::cerr << "  " << (e.key.empty() ? std::string("(file)") : e.key) << ": " << e.reason
                << "\n";
    }
    return std::nullopt;
  }
  return result.config;
}

}  // namespace

int main(int argc, char** argv) {
  using walrelay::ExitCode;
  walrelay::tune_allocator();
  CLI::App app{
      "walrelay: PostgreSQL logical replication (wal2json) to Kafka, at least once (or exactly "
      "once "
      "with delivery: exactly_once)"};
  app.set_version_flag("--version", std::string("walrelay ") + WALRELAY_VERSION);
  app.require_subcommand(1);
  std::string log_format = "text";
  app.add_option("--log-format", log_format, "text (default) or json: one JSON object a line")
      ->check(CLI::IsMember({"text", "json"}));

  std::string config_path;
  auto* run = app.add_subcommand("run", "stream the slot to Kafka until SIGINT/SIGTERM");
  run->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  auto* check = app.add_subcommand("check", "validate the configuration and connect to both ends");
  check->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  auto* snapshot = app.add_subcommand(
      "snapshot",
      "ask the running connector for an incremental snapshot of tables (or to stop one)");
  snapshot->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  std::vector<std::string> snapshot_tables;
  snapshot->add_option("-t,--table", snapshot_tables, "schema.table (repeatable)");
  bool snapshot_stop = false;
  snapshot->add_flag("--stop", snapshot_stop, "stop the snapshot of the tables (all when none)");
  auto* slot = app.add_subcommand("slot", "the configured replication slot: status, create, drop");
  std::string slot_action;
  bool slot_json = false;
  bool slot_yes = false;
  slot->add_option("action", slot_action, "status | create | drop")->required();
  slot->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  slot->add_flag("--json", slot_json, "one JSON object instead of a table");
  slot->add_flag("--yes", slot_yes, "confirm drop");
  auto* tail = app.add_subcommand(
      "tail", "print the records walrelay would publish, as JSON lines, without Kafka");
  tail->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  bool tail_from_slot = false;
  std::size_t tail_max = 0;
  tail->add_flag("--from-slot", tail_from_slot,
                 "read the configured slot's pending changes (never confirmed) instead of a "
                 "temporary slot's new ones");
  tail->add_option("--max", tail_max, "stop after this many records (0: until interrupted)");
  auto* health = app.add_subcommand(
      "health",
      "probe a running walrelay's /ready (or --path) endpoint: exit 0 when it answers 200");
  std::string health_address = "127.0.0.1:9187";
  std::string health_path = "/ready";
  health->add_option("--address", health_address, "host:port of metrics.listen");
  health->add_option("--path", health_path, "/ready (default) or /live");

  auto* reconcile = app.add_subcommand(
      "reconcile", "compare the outbox tables with their topics: exit 0 clean, 1 breaks found");
  reconcile->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  walrelay::reconcile::Options reconcile_options;
  std::string reconcile_since;
  reconcile->add_option("-t,--table", reconcile_options.tables, "schema.table (repeatable)");
  reconcile->add_option("--since", reconcile_since, "only events at most this old (e.g. 24h)");
  reconcile->add_flag("--json", reconcile_options.json, "one JSON object with every break");
  std::string reconcile_schedule;
  reconcile->add_option("--schedule", reconcile_schedule,
                        "keep running, one run every this long (e.g. 1h), serving /metrics");
  reconcile->add_flag("--inbox", reconcile_options.inbox,
                      "also compare with the ledger of the configuration's inbox: section");
  reconcile->add_flag("--repair", reconcile_options.repair,
                      "publish the missing events again (never phantoms or conflicts)");

  // `inbox` runs the consumer; `inbox status` reads its tables. Both take --config (given after
  // the word it belongs to), so neither option is required by itself.
  auto* inbox = app.add_subcommand(
      "inbox", "consume Kafka into PostgreSQL, every event decided once (docs/inbox.md)");
  inbox->add_option("-c,--config", config_path, "configuration file (YAML) with an inbox: section");
  auto* inbox_status =
      inbox->add_subcommand("status", "decisions counted, deferred and quarantined events");
  inbox_status->add_option("-c,--config", config_path, "configuration file (YAML)");
  bool inbox_status_json = false;
  inbox_status->add_flag("--json", inbox_status_json, "one JSON object instead of a table");
  auto* inbox_redrive = inbox->add_subcommand(
      "redrive", "decide a quarantined or deferred event again (after a fix), audited");
  inbox_redrive->add_option("-c,--config", config_path, "configuration file (YAML)");
  std::vector<std::string> redrive_ids;
  std::string redrive_tenant;
  std::string redrive_actor;
  inbox_redrive->add_option("--event-id", redrive_ids, "event id (repeatable)")->required();
  inbox_redrive->add_option("--tenant", redrive_tenant, "the events' tenant (default \"\")");
  inbox_redrive->add_option("--actor", redrive_actor,
                            "who asks, for the audit row (default: the database user)");

  // `outbox status` and `outbox retry`: the polled outbox's health and its failed rows
  // (source.mode poll, docs/relay.md).
  auto* outbox = app.add_subcommand(
      "outbox", "a polled outbox (source.mode poll): status, retry of failed rows (docs/relay.md)");
  outbox->require_subcommand(1);
  auto* outbox_status =
      outbox->add_subcommand("status", "backlog and oldest pending age per type, failed rows");
  outbox_status->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  bool outbox_status_json = false;
  outbox_status->add_flag("--json", outbox_status_json, "one JSON object instead of a table");
  auto* outbox_retry = outbox->add_subcommand(
      "retry", "put failed rows back to pending (attempts 0), audited, in one transaction");
  outbox_retry->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  walrelay::relay::RetryRequest retry_request;
  auto* retry_ids = outbox_retry->add_option("--event-id", retry_request.event_ids,
                                             "event id of a failed row (repeatable)");
  auto* retry_all = outbox_retry->add_flag("--failed", retry_request.all_failed,
                                           "every failed row of every configured table");
  retry_ids->excludes(retry_all);
  outbox_retry->add_option("--actor", retry_request.actor,
                           "who asks, for the audit row (default: the OS user)");

  try {
    app.parse(argc, argv);
    if (*outbox_retry && retry_request.event_ids.empty() && !retry_request.all_failed) {
      throw CLI::RequiredError("--event-id or --failed");
    }
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::kConfigError);
  }

  if (*health) {
    // No configuration needed: an image's HEALTHCHECK or a probe runs just this.
    std::string body;
    const int status =
        walrelay::metrics::probe(health_address, health_path, std::chrono::seconds(3), body);
    std::cout << (status == 0 ? std::string("no answer from ") + health_address + "\n"
                              : std::to_string(status) + " " + body);
    return status == 200 ? 0 : 1;
  }

  auto logger = spdlog::stderr_color_mt("walrelay");
  if (log_format == "json") {
    logger->set_formatter(std::make_unique<walrelay::JsonLogFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  }
  spdlog::set_default_logger(logger);

  if (*inbox) {
    if (config_path.empty()) {
      std::cerr << "walrelay inbox: --config is required\n";
      return static_cast<int>(ExitCode::kConfigError);
    }
    auto inbox_cfg = load_or_report(config_path, &walrelay::config::load_inbox_config_file);
    if (!inbox_cfg) return static_cast<int>(ExitCode::kConfigError);
    spdlog::set_level(spdlog::level::from_str(inbox_cfg->log.level));
    if (*inbox_redrive) {
      return static_cast<int>(walrelay::inbox::run_inbox_redrive(
          *inbox_cfg, redrive_ids, redrive_tenant, redrive_actor, std::cout, std::cerr));
    }
    if (*inbox_status) {
      return static_cast<int>(
          walrelay::inbox::run_inbox_status(*inbox_cfg, inbox_status_json, std::cout, std::cerr));
    }
    return static_cast<int>(walrelay::inbox::run_inbox(std::move(*inbox_cfg)));
  }

  auto cfg = load_or_report(config_path);
  if (!cfg) return static_cast<int>(ExitCode::kConfigError);
  spdlog::set_level(spdlog::level::from_str(cfg->log.level));

  const bool poll = cfg->source.mode == walrelay::config::SourceMode::kPoll;
  if (*outbox) {
    if (!poll) {
      std::cerr << "walrelay outbox: " << config_path
                << " has source.mode logical: outbox status and retry read the status columns of "
                   "a polled outbox (source.mode: poll, docs/relay.md)\n";
      return static_cast<int>(ExitCode::kConfigError);
    }
    if (*outbox_status) {
      return static_cast<int>(
          walrelay::relay::run_outbox_status(*cfg, outbox_status_json, std::cout, std::cerr));
    }
    return static_cast<int>(
        walrelay::relay::run_outbox_retry(*cfg, retry_request, std::cout, std::cerr));
  }
  if (poll && !*run && !*check && !*reconcile) {
    // The other commands read the slot or its stream, which poll mode has none of.
    std::cerr << "walrelay: source.mode poll (docs/relay.md) supports run, check, outbox and "
                 "reconcile only\n";
    return static_cast<int>(ExitCode::kConfigError);
  }
  if (*reconcile) {
    if (!reconcile_since.empty()) {
      auto since = walrelay::config::parse_duration(reconcile_since);
      if (!since) {
        std::cerr << "walrelay reconcile: --since: " << since.error() << "\n";
        return static_cast<int>(ExitCode::kConfigError);
      }
      reconcile_options.since = *since;
    }
    if (!reconcile_schedule.empty()) {
      auto period = walrelay::config::parse_duration(reconcile_schedule);
      if (!period || period->count() <= 0) {
        std::cerr << "walrelay reconcile: --schedule: "
                  << (period ? std::string("must be more than 0") : period.error()) << "\n";
        return static_cast<int>(ExitCode::kConfigError);
      }
      if (reconcile_options.repair) {
        // Re-emitting is an operator's decision after reading a report, never a timer's.
        std::cerr << "walrelay reconcile: --repair runs once: not with --schedule\n";
        return static_cast<int>(ExitCode::kConfigError);
      }
      reconcile_options.schedule = *period;
    }
    return static_cast<int>(walrelay::reconcile::run(*cfg, reconcile_options, std::cout));
  }
  if (*check) {
    return static_cast<int>(poll ? walrelay::relay::run_check(*cfg, std::cout)
                                 : walrelay::run_check(*cfg, std::cout));
  }
  if (poll) {
    boost::asio::io_context io(1);
    walrelay::relay::Relay relay(io, std::move(*cfg));
    return static_cast<int>(walrelay::app::run(io, relay));
  }
  if (*tail) {
    return static_cast<int>(walrelay::run_tail(*cfg, tail_from_slot, tail_max, std::cout));
  }
  if (*slot) {
    return static_cast<int>(
        walrelay::run_slot_command(*cfg, slot_action, slot_json, slot_yes, std::cout));
  }
  if (*snapshot) {
    walrelay::snapshot::Signal signal;
    signal.kind = snapshot_stop ? walrelay::snapshot::Signal::Kind::kStop
                                : walrelay::snapshot::Signal::Kind::kExecute;
    signal.tables = snapshot_tables;
    if (!snapshot_stop && snapshot_tables.empty()) {
      std::cerr << "walrelay snapshot: --table is required (or --stop)\n";
      return static_cast<int>(ExitCode::kConfigError);
    }
    if (!snapshot_stop) {
      // The connector would refuse these only in its log: say so here, and send nothing.
      auto refused = walrelay::refused_snapshot_tables(*cfg, snapshot_tables);
      if (!refused) {
        std::cerr << "walrelay snapshot: " << refused.error() << "\n";
        return static_cast<int>(ExitCode::kRuntimeError);
      }
      if (!refused->empty()) {
        for (const auto& r : *refused) std::cerr << "walrelay snapshot: " << r << "\n";
        std::cerr << "walrelay snapshot: no signal sent\n";
        return static_cast<int>(ExitCode::kConfigError);
      }
    }
    auto sent =
        walrelay::snapshot::send_signal(cfg->source.conninfo, cfg->snapshot.signal_prefix, signal);
    if (!sent) {
      std::cerr << "walrelay snapshot: " << sent.error() << "\n";
      return static_cast<int>(ExitCode::kRuntimeError);
    }
    std::cout << "signal sent at LSN " << *sent << ": " << walrelay::snapshot::signal_json(signal)
              << "\n(the running connector acts on it when its stream reaches that position)\n";
    return 0;
  }

  boost::asio::io_context io(1);
  walrelay::Connector connector(io, std::move(*cfg));
  return static_cast<int>(walrelay::app::run(io, connector));
}
