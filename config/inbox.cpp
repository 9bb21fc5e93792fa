// The `inbox:` section (config/include/walrelay/config/inbox.hpp), read by the one Loader with
// its value readers; and the entry points of `walrelay inbox` (inbox_load.hpp).
#include <regex>

#include "loader.hpp"
#include "walrelay/config/inbox_load.hpp"

namespace walrelay::config {

namespace loading {

namespace {

constexpr std::size_t kMaxBatchEvents = 100'000;
constexpr std::size_t kMaxTopicName = 249;  // Kafka's topic name limit (Topic.MAX_NAME_LENGTH)

constexpr std::string_view kHeaderPrefix = "header:";
constexpr std::string_view kJsonPrefix = "json:";

std::string_view spelling(InboxFieldSource source) {
  switch (source) {
    case InboxFieldSource::kNone:
      return "\"\"";
    case InboxFieldSource::kHeader:
      return "header:NAME";
    case InboxFieldSource::kKey:
      return "key";
    case InboxFieldSource::kJson:
      return "json:/pointer";
    case InboxFieldSource::kValue:
      return "value";
  }
  return "?";
}

}  // namespace

std::optional<InboxField> Loader::inbox_field(const YAML::Node& node, const std::string& path,
                                              std::initializer_list<InboxFieldSource> allowed) {
  std::string expected;
  for (std::size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) expected += i + 1 == allowed.size() ? " or " : ", ";
    expected += spelling(allowed.begin()[i]);
  }
  // A YAML null (`version:` with nothing after it) is the empty spelling.
  std::optional<std::string> value;
  if (node.IsNull()) {
    value = std::string();
  } else {
    value = scalar(node, path, expected);
  }
  if (!value) return std::nullopt;
  InboxField field;
  const std::string_view text = *value;
  if (text.empty()) {
    field.source = InboxFieldSource::kNone;
  } else if (text == "key") {
    field.source = InboxFieldSource::kKey;
  } else if (text == "value") {
    field.source = InboxFieldSource::kValue;
  } else if (text.starts_with(kHeaderPrefix)) {
    field.source = InboxFieldSource::kHeader;
    field.name = std::string(text.substr(kHeaderPrefix.size()));
    if (field.name.empty()) {
      error(path, "header: needs a header name (header:NAME), got " + quoted(*value));
      return std::nullopt;
    }
  } else if (text.starts_with(kJsonPrefix)) {
    field.source = InboxFieldSource::kJson;
    field.name = std::string(text.substr(kJsonPrefix.size()));
    // RFC 6901: a non-empty pointer starts with '/'.
    if (field.name.empty() || field.name.front() != '/') {
      error(path, "json: needs a JSON pointer starting with / (json:/path), got " + quoted(*value));
      return std::nullopt;
    }
  } else {
    error(path, "expected " + expected + ", got " + quoted(*value));
    return std::nullopt;
  }
  if (std::ranges::find(allowed, field.source) == allowed.end()) {
    error(path, "expected " + expected + ", got " + quoted(*value));
    return std::nullopt;
  }
  return field;
}

std::optional<std::chrono::milliseconds> Loader::long_duration(const YAML::Node& node,
                                                               const std::string& path) {
  if (node.IsScalar() && !node.Scalar().empty() && node.Scalar().back() == 'd') {
    const auto value = scalar(node, path, "a duration");
    if (!value) return std::nullopt;
    const std::string_view digits = std::string_view(*value).substr(0, value->size() - 1);
    long long days = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), days);
    // At most 100 years: milliseconds of more would still fit, but nobody means it.
    if (ec != std::errc() || ptr != digits.data() + digits.size() || days <= 0 || days > 36'500) {
      error(path, "expected a positive number of days (1d..36500d), got " + quoted(*value));
      return std::nullopt;
    }
    return std::chrono::milliseconds(std::chrono::hours(24) * days);
  }
  return duration(node, path);
}

void Loader::read_inbox(const YAML::Node& node, const std::string& path) {
  InboxConfig& inbox = config_.inbox;
  inbox.present = true;
  bool topics_given = false;
  bool retention_given = false;
  const Field fields[] = {
      {"conninfo",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) inbox.conninfo = std::move(*s);
       }},
      {"group_id",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto s = nonempty_string(v, p)) inbox.group_id = std::move(*s);
       }},
      {"topics",
       [&](const YAML::Node& v, const std::string& p) {
         topics_given = true;
         if (!v.IsSequence() || v.size() == 0) {
           error(p, "expected a non-empty list of topic names or ^regex, got " + describe(v));
           return;
         }
         for (std::size_t i = 0; i < v.size(); ++i) {
           const std::string item = p + "[" + std::to_string(i) + "]";
           auto topic = nonempty_string(v[i], item);
           if (!topic) continue;
           if (topic->front() == '^') {
             try {
               std::regex check(*topic, std::regex::extended);
             } catch (const std::regex_error& e) {
               error(item, "invalid regular expression " + quoted(*topic) + ": " + e.what());
               continue;
             }
           } else if (topic->size() > kMaxTopicName ||
                      !std::ranges::all_of(*topic, is_topic_char) || *topic == "." ||
                      *topic == "..") {
             error(item, "not a Kafka topic name (letters, digits, . _ -, at most 249): " +
                             quoted(*topic) + " (a pattern starts with ^)");
             continue;
           }
           if (std::ranges::find(inbox.topics, *topic) != inbox.topics.end()) {
             error(item, "duplicate topic " + quoted(*topic));
             continue;
           }
           inbox.topics.push_back(std::move(*topic));
         }
       }},
      {"tenant",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto f = inbox_field(
                 v, p,
                 {InboxFieldSource::kNone, InboxFieldSource::kHeader, InboxFieldSource::kKey}))
           inbox.tenant = *f;
       }},
      {"event_id",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto f = inbox_field(v, p, {InboxFieldSource::kHeader, InboxFieldSource::kKey}))
           inbox.event_id = *f;
       }},
      {"digest",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto f = inbox_field(v, p, {InboxFieldSource::kHeader, InboxFieldSource::kValue}))
           inbox.digest = *f;
       }},
      {"aggregate",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto f = inbox_field(
                 v, p,
                 {InboxFieldSource::kKey, InboxFieldSource::kHeader, InboxFieldSource::kJson}))
           inbox.aggregate = *f;
       }},
      {"version",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto f = inbox_field(
                 v, p,
                 {InboxFieldSource::kNone, InboxFieldSource::kHeader, InboxFieldSource::kJson}))
           inbox.version = *f;
       }},
      {"schema",
       [&](const YAML::Node& v, const std::string& p) {
         auto s = scalar(v, p, "a schema name");
         if (!s) return;
         if (!is_plain_identifier(*s)) {
           error(p,
                 "expected a plain lower-case identifier ([a-z_][a-z0-9_]*, at most 63 "
                 "bytes), got " +
                     quoted(*s));
           return;
         }
         inbox.schema = std::move(*s);
       }},
      {"handlers", [&](const YAML::Node& v, const std::string& p) { read_inbox_handlers(v, p); }},
      {"batch", [&](const YAML::Node& v, const std::string& p) { read_inbox_batch(v, p); }},
      {"retention",
       [&](const YAML::Node& v, const std::string& p) {
         retention_given = true;
         if (auto d = long_duration(v, p)) inbox.retention = *d;
       }},
      {"defer_timeout",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = long_duration(v, p)) inbox.defer_timeout = *d;
       }},
  };
  const auto seen = walk(node, path, fields);
  if (!seen) return;
  if (!seen->contains("conninfo")) error(join(path, "conninfo"), std::string(kMissing));
  if (!seen->contains("group_id")) error(join(path, "group_id"), std::string(kMissing));
  if (!topics_given) error(join(path, "topics"), std::string(kMissing));
  // A deferred event is decided again until defer_timeout: its ledger row must outlive that.
  if (inbox.retention < inbox.defer_timeout) {
    error(join(path, retention_given ? "retention" : "defer_timeout"),
          "retention must be at least defer_timeout");
  }
  // A handler for a topic the inbox does not consume would never run.
  const bool any_pattern =
      std::ranges::any_of(inbox.topics, [](const std::string& t) { return t.front() == '^'; });
  for (std::size_t i = 0; i < inbox.handlers.size(); ++i) {
    const std::string& topic = inbox.handlers[i].topic;
    if (!topic.empty() && !any_pattern && !inbox.topics.empty() &&
        std::ranges::find(inbox.topics, topic) == inbox.topics.end()) {
      error(join(path, "handlers[" + std::to_string(i) + "].topic"),
            quoted(topic) + " is not one of inbox.topics");
    }
  }
}

void Loader::read_inbox_handlers(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) {
    error(path, "expected a list of handlers ({topic, event_type, sql}), got " + describe(node));
    return;
  }
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    InboxHandler handler;
    const Field fields[] = {
        {"topic",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) handler.topic = std::move(*s);
         }},
        {"event_type",
         [&](const YAML::Node& v, const std::string& p) {
           if (v.IsNull()) return;
           if (auto s = scalar(v, p, "an event type or \"\"")) handler.event_type = std::move(*s);
         }},
        {"sql",
         [&](const YAML::Node& v, const std::string& p) {
           if (auto s = nonempty_string(v, p)) handler.sql = std::move(*s);
         }},
    };
    const auto seen = walk(node[i], item, fields);
    if (!seen) continue;
    if (!seen->contains("topic")) error(join(item, "topic"), std::string(kMissing));
    if (!seen->contains("sql")) error(join(item, "sql"), std::string(kMissing));
    config_.inbox.handlers.push_back(std::move(handler));
  }
}

void Loader::read_inbox_batch(const YAML::Node& node, const std::string& path) {
  InboxConfig& inbox = config_.inbox;
  const Field fields[] = {
      {"max_events",
       [&](const YAML::Node& v, const std::string& p) {
         auto n = positive_int(v, p);
         if (!n) return;
         if (*n > kMaxBatchEvents) {
           error(p, "at most " + std::to_string(kMaxBatchEvents) + " events per transaction, got " +
                        std::to_string(*n));
           return;
         }
         inbox.batch_max_events = *n;
       }},
      {"max_wait",
       [&](const YAML::Node& v, const std::string& p) {
         if (auto d = duration(v, p)) inbox.batch_max_wait = *d;
       }},
  };
  walk(node, path, fields);
}

}  // namespace loading

LoadResult load_inbox_config_file(const std::string& path) {
  return loading::load_file(path, loading::Purpose::kInbox);
}

LoadResult load_inbox_config_text(const std::string& yaml_text, const std::string& source_name,
                                  const EnvLookup& env) {
  return loading::load_text(yaml_text, source_name, env, loading::Purpose::kInbox);
}

std::string to_string(const InboxField& field) {
  switch (field.source) {
    case InboxFieldSource::kNone:
      return "";
    case InboxFieldSource::kHeader:
      return "header:" + field.name;
    case InboxFieldSource::kKey:
      return "key";
    case InboxFieldSource::kJson:
      return "json:" + field.name;
    case InboxFieldSource::kValue:
      return "value";
  }
  return "?";
}

}  // namespace walrelay::config
