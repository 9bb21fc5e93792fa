#include "walrelay/snapshot/signal.hpp"

#include <gtest/gtest.h>

using walrelay::snapshot::parse_signal;
using walrelay::snapshot::Signal;
using walrelay::snapshot::signal_json;

TEST(Signal, DebeziumExecuteSnapshot) {
  auto s = parse_signal(
      R"({"type":"execute-snapshot","data":{"data-collections":["public.orders","s.\"T\""],"type":"INCREMENTAL"}})");
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->kind, Signal::Kind::kExecute);
  ASSERT_EQ(s->tables.size(), 2u);
  EXPECT_EQ(s->tables[0], "public.orders");
  EXPECT_EQ(s->tables[1], "s.\"T\"");
}

TEST(Signal, StopWithoutTablesStopsEverything) {
  auto s = parse_signal(R"({"type":"stop-snapshot","data":{"type":"incremental"}})");
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->kind, Signal::Kind::kStop);
  EXPECT_TRUE(s->tables.empty());
}

TEST(Signal, MistakesNameTheField) {
  EXPECT_NE(parse_signal("{").error().find("not a JSON document"), std::string::npos);
  EXPECT_NE(parse_signal(R"({"data":{}})").error().find("`type`"), std::string::npos);
  EXPECT_NE(parse_signal(R"({"type":"log"})").error().find("not execute-snapshot"),
            std::string::npos);
  EXPECT_NE(parse_signal(R"({"type":"execute-snapshot","data":{"data-collections":[]}})")
                .error()
                .find("at least one table"),
            std::string::npos);
  EXPECT_NE(parse_signal(R"({"type":"execute-snapshot","data":{"data-collections":"t"}})")
                .error()
                .find("not an array"),
            std::string::npos);
  EXPECT_NE(parse_signal(R"({"type":"execute-snapshot","data":{"data-collections":[1]}})")
                .error()
                .find("other than a string"),
            std::string::npos);
  EXPECT_NE(
      parse_signal(
          R"({"type":"execute-snapshot","data":{"data-collections":["a.b"],"type":"blocking"}})")
          .error()
          .find("not supported"),
      std::string::npos);
}

// Debezium's row filters and surrogate keys change what a snapshot reads: a signal with one is
// refused (walrelay would read every row of the table instead), never silently widened.
TEST(Signal, RowFiltersAndSurrogateKeysAreRefused) {
  for (const char* extra : {R"("additional-conditions":[{"data-collection":"a.b","filter":"x=1"}])",
                            R"("additional-condition":"x = 1")", R"("surrogate-key":"x")"}) {
    const std::string json =
        std::string(R"({"type":"execute-snapshot","data":{"data-collections":["a.b"],)") + extra +
        "}}";
    auto s = parse_signal(json);
    ASSERT_FALSE(s) << json;
    EXPECT_NE(s.error().find("not supported"), std::string::npos) << s.error();
  }
  // Empty ones ask for nothing different.
  EXPECT_TRUE(parse_signal(
      R"({"type":"execute-snapshot","data":{"data-collections":["a.b"],"additional-conditions":[],"additional-condition":"","surrogate-key":""}})"));
}

TEST(Signal, WhatTheCommandSendsParsesBack) {
  Signal s;
  s.tables = {"public.orders", "a.\"b \\\" c\""};
  const std::string json = signal_json(s);
  EXPECT_EQ(
      json.rfind(R"({"type":"execute-snapshot","data":{"data-collections":["public.orders",)", 0),
      0u)
      << json;
  auto back = parse_signal(json);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->tables, s.tables);
}
