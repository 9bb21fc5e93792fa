#pragma once

#include <string>

#include "walrelay/config/config.hpp"
#include "walrelay/config/inbox.hpp"

namespace walrelay::config {

/// Loads a file for `walrelay inbox`: the `inbox:` section is required, and `kafka:`, `log:` and
/// `metrics:` are read as for `run`; `name`, `source` and `tables` are not required (a consumer
/// service has no slot). Errors as load_config_file (key and reason, every one found).
LoadResult load_inbox_config_file(const std::string& path);

/// As above, from text (tests).
LoadResult load_inbox_config_text(const std::string& yaml_text, const std::string& source_name,
                                  const EnvLookup& env);

}  // namespace walrelay::config
