#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <iostream>

#include "check.hpp"
#include "connector.hpp"
#include "exit_code.hpp"
#include "walrelay/config/config.hpp"

namespace {

// Loads the configuration or prints every error (key and reason) and returns nullopt.
std::optional<walrelay::config::Config> load_or_report(const std::string& path) {
  auto result = walrelay::config::load_config_file(path);
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
  CLI::App app{"walrelay: PostgreSQL logical replication (wal2json) to Kafka, at least once"};
  app.set_version_flag("--version", std::string("walrelay ") + WALRELAY_VERSION);
  app.require_subcommand(1);

  std::string config_path;
  auto* run = app.add_subcommand("run", "stream the slot to Kafka until SIGINT/SIGTERM");
  run->add_option("-c,--config", config_path, "configuration file (YAML)")->required();
  auto* check = app.add_subcommand("check", "validate the configuration and connect to both ends");
  check->add_option("-c,--config", config_path, "configuration file (YAML)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(ExitCode::kConfigError);
  }

  auto logger = spdlog::stderr_color_mt("walrelay");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");
  spdlog::set_default_logger(logger);

  auto cfg = load_or_report(config_path);
  if (!cfg) return static_cast<int>(ExitCode::kConfigError);
  spdlog::set_level(spdlog::level::from_str(cfg->log.level));

  if (*check) return static_cast<int>(walrelay::run_check(*cfg, std::cout));

  boost::asio::io_context io(1);
  walrelay::Connector connector(io, std::move(*cfg));
  return static_cast<int>(connector.run());
}
