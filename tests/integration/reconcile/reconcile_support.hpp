#pragma once

// Support for reconcile's integration tests (reconcile_test.cpp): an outbox table walrelay
// streams, `walrelay reconcile` run as a child process, and records produced by hand into a
// topic (the breaks a test makes).

#include <map>
#include <string>
#include <vector>

#include "harness.hpp"

namespace walrelay::itest {

/// What one `walrelay reconcile` run printed and returned.
struct ReconcileRun {
  int exit_code = WalrelayProcess::kNotRunning;
  std::string out;  ///< stdout: the summary or the JSON
  std::string err;  ///< stderr: the log
};

/// Runs `walrelay reconcile --config <config_yaml's file> <args>` to its end (at most `timeout`).
ReconcileRun run_reconcile(const std::string& config_yaml, const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout = std::chrono::seconds(120));

/// Produces one record (key, value, headers in order) into `topic` and waits for its delivery;
/// throws std::runtime_error if it is not delivered within 30 s.
void produce_record(const std::string& bootstrap, const std::string& topic, const std::string& key,
                    const std::string& value,
                    const std::vector<std::pair<std::string, std::string>>& headers);

/// The breaks of a `--json` report (`out`: a run's stdout) as "class:id" strings, sorted; throws
/// if it does not parse.
std::vector<std::string> json_breaks(const std::string& out);

}  // namespace walrelay::itest
