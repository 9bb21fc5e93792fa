#pragma once

// Parsing of the `reconcile:` section (config/reconcile.hpp), called by the loader in
// config.cpp. Internal to config/.

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "walrelay/config/config.hpp"

namespace walrelay::config::detail {

/// Reads `node` (the value of `reconcile`, key path `path`) into `out`; every problem is appended
/// to `errors` with its key (`reconcile.buckets`), unknown keys too. `${VAR}` is expanded with
/// `env` as everywhere else.
void read_reconcile(const YAML::Node& node, const std::string& path, const EnvLookup& env,
                    ReconcileConfig& out, std::vector<ConfigError>& errors);

}  // namespace walrelay::config::detail
