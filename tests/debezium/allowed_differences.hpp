// The differences from the real Debezium the compatibility suite accepts, each with its reason
// and the page of docs/ that documents it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace walrelay::itest {

// ===================================================================== allowed differences

enum class Why {
  kIntended,     ///< walrelay keeps its own behaviour on purpose (Debezium is lossy there)
  kNotYetFixed,  ///< a walrelay bug, not yet fixed (each entry goes when it is)
};

/// A difference the test accepts. `path` is a glob (`*` matches any characters) over the
/// difference's path and also covers everything below it (`after.p` covers `after.p.x`).
/// Paths: `key`, `value` (tombstone on one side only), `header.<name>`, `<field>.<field>...` in
/// the value, `<object>{order}` for the order of the fields both sides have.
struct Allowed {
  Why why;
  std::string_view pair;   ///< the comparison it applies to (Pair::name), or "*" for every one
  std::string_view table;  ///< table name (topic's last part), or "*" for every table
  std::string_view path;
  std::string_view ops;  ///< ops of the records it applies to ("" = all; "~" = tombstones)
  /// A glob Debezium's value text must match ("" = any), for differences of some values only.
  std::string_view debezium;
  std::string_view reason;
  std::string_view readme;  ///< the README section or row that documents it
};

// clang-format off
inline const std::vector<Allowed> kAllowed = {
    // ============================================================================== INTENDED
    // walrelay keeps its own behaviour: Debezium loses or garbles information here.

    // Observed on every record: __debezium.context.connectorLogicalName=<topic.prefix>,
    // .taskId=0, .connectorName=postgresql, .runId=<uuid>; walrelay has none.
    {Why::kIntended, "*", "*", "header.__debezium.context.*", "", "",
     "Kafka Connect's per-record context headers (connector, task, run id): no CDC data",
     "not in README"},
    // Observed: debezium <absent>, walrelay 0/1D1D0640:r:<schema>.arrays:0:0 / 0/1A129A8:2.
    {Why::kIntended, "*", "*", "header.id", "", "",
     "walrelay's deterministic event id, to deduplicate replays",
     "Delivery guarantee; What gets published"},
    // Observed (defaults, explicit NULLs in columns with DEFAULT 'dflt' / DEFAULT 42):
    // debezium "dflt" and 42, walrelay null, in snapshot (r), insert (c) and update (u) records.
    // Kafka Connect's JsonConverter writes a field's schema default instead of a null value.
    {Why::kIntended, "main", "defaults", "*.v", "", "",
     "Debezium publishes the column DEFAULT for an explicit NULL; walrelay keeps the NULL",
     "Value mapping: SQL NULL is always null"},
    {Why::kIntended, "main", "defaults", "*.n", "", "",
     "Debezium publishes the column DEFAULT for an explicit NULL; walrelay keeps the NULL",
     "Value mapping: SQL NULL is always null"},
    // Observed: streamed name columns debezium null, walrelay "pg_class" / "pg_type" (Debezium's
    // snapshot reads them right: no difference for r).
    {Why::kIntended, "main", "names", "*.nm", "cud", "",
     "Debezium streams `name` columns as null (pgoutput); walrelay publishes the text",
     "Value mapping: uuid, text, varchar, ... (PostgreSQL text)"},
    // Observed: debezium <absent> (column left out: "No converter found for column ... of type
    // box/lseg/circle/pair/_d_pos"), walrelay "(1,1),(0,0)", "[(0,0),(1,1)]", "<(0,0),2.5>",
    // "(1,one)", [1,2,null].
    {Why::kIntended, "main", "geoms", "*.bx", "", "",
     "Debezium drops box columns; walrelay publishes the PostgreSQL text",
     "Value mapping: geometric"},
    {Why::kIntended, "main", "geoms", "*.ls", "", "",
     "Debezium drops lseg columns; walrelay publishes the PostgreSQL text",
     "Value mapping: geometric"},
    {Why::kIntended, "main", "geoms", "*.ci", "", "",
     "Debezium drops circle columns; walrelay publishes the PostgreSQL text",
     "Value mapping: geometric"},
    {Why::kIntended, "main", "composites", "*.pr", "", "",
     "Debezium drops composite-type columns; walrelay publishes the PostgreSQL text",
     "Value mapping: composite"},
    {Why::kIntended, "main", "domains", "*.darr", "", "",
     "Debezium drops arrays of a domain; walrelay maps them as arrays of the base type",
     "Value mapping: arrays; domains"},
    // Observed: streamed rows debezium <absent> (pgoutput before PostgreSQL 18 does not send
    // generated columns, and Debezium leaves the field out), walrelay 20 / 42 / null. Debezium's
    // snapshot has the field: no difference for r.
    {Why::kIntended, "main", "generated", "*.g", "cud", "",
     "Debezium's streamed records lack generated columns; walrelay publishes them",
     "not in README"},
    // Observed: debezium "[\"2024-03-10 10:00:00+05:30\",\"2024-03-11 05:30:00+05:30\")" (the
    // JVM's time zone, Asia/Kolkata here), walrelay "[\"2024-03-10 04:30:00+00\",...)" (UTC).
    {Why::kIntended, "main", "texts", "*.rtz", "", "",
     "Debezium prints tstzrange in the JVM's time zone; walrelay in UTC, the same everywhere",
     "Value mapping: ranges (PostgreSQL text)"},
    // Observed for date 'infinity' / '-infinity' / '0044-03-15 BC' in snapshot rows: debezium
    // -622191233 / -625821271 / -703383 (its JDBC read; the era is lost), walrelay -2147472692 /
    // -2147472691 / -735160, which is what Debezium itself streams for the same values.
    {Why::kIntended, "main", "times", "*.dt", "r", "",
     "Debezium's snapshot garbles infinite and BC dates; walrelay gives Debezium's streamed value",
     "Value mapping: infinity/-infinity and BC dates (Debezium's sentinels)"},
    // Observed: which row is first_in_data_collection / last(_in_data_collection) differs when
    // the heap order is not the key order: Debezium's snapshot SELECT has no ORDER BY.
    {Why::kIntended, "main", "text_keys", "source.snapshot", "r", "",
     "walrelay reads snapshots in key order, Debezium in heap order: first/last rows differ",
     "Snapshots: tables are read in key order"},
    {Why::kIntended, "main", "typed_keys", "source.snapshot", "r", "",
     "walrelay reads snapshots in key order, Debezium in heap order: first/last rows differ",
     "Snapshots: tables are read in key order"},

    // Observed (streamed only; snapshot rows agree): debezium "NaN", "Infinity", "-Infinity",
    // walrelay null: the test server's wal2json 2.5 prints them as null and walrelay cannot know
    // the value (it warns, README); wal2json 2.6's numeric-data-types-as-string gives the strings.
    {Why::kIntended, "main", "floats", "*", "cud", "\"*Infinity\"",
     "wal2json before 2.6 prints NaN and +-Infinity of float columns as null",
     "Things to know: wal2json before 2.6"},
    {Why::kIntended, "main", "floats", "*", "cud", "\"NaN\"",
     "wal2json before 2.6 prints NaN and +-Infinity of float columns as null",
     "Things to know: wal2json before 2.6"},

    // The same for numeric NaN and +-Infinity (decimals: columns n, n38, nu; after and before).
    // Observed, streamed only: string mode debezium "NAN", "POSITIVE_INFINITY",
    // "NEGATIVE_INFINITY", double mode "NaN", "Infinity", "-Infinity"; walrelay null (wal2json
    // 2.5 prints numeric NaN/Infinity as null too). The snapshot rows agree.
    {Why::kIntended, "string", "decimals", "*", "cud", "\"NAN\"",
     "wal2json before 2.6 prints NaN and +-Infinity of numeric columns as null",
     "Things to know: wal2json before 2.6"},
    {Why::kIntended, "string", "decimals", "*", "cud", "\"*_INFINITY\"",
     "wal2json before 2.6 prints NaN and +-Infinity of numeric columns as null",
     "Things to know: wal2json before 2.6"},
    {Why::kIntended, "double", "decimals", "*", "cud", "\"NaN\"",
     "wal2json before 2.6 prints NaN and +-Infinity of numeric columns as null",
     "Things to know: wal2json before 2.6"},
    {Why::kIntended, "double", "decimals", "*", "cud", "\"*Infinity\"",
     "wal2json before 2.6 prints NaN and +-Infinity of numeric columns as null",
     "Things to know: wal2json before 2.6"},

    // numeric[] with a NaN or +-Infinity element, snapshot and streamed (decimals.na
    // '{NaN,NULL,Infinity,-Infinity}', na2 numeric(10,2)[] '{NaN,-0.01}', na '{NaN,1}'):
    // debezium null for the whole array (its log: "Failed to read value of array na"), walrelay ["NAN",null,"POSITIVE_INFINITY","NEGATIVE_INFINITY"] /
    // ["NAN","-0.01"] / ["NAN","1"] in string mode and ["NaN",null,"Infinity","-Infinity"] /
    // ["NaN",-0.01] / ["NaN",1.0] in double mode.
    {Why::kIntended, "string", "decimals", "*.na", "", "null",
     "Debezium publishes a numeric array with a NaN/Infinity element as null (lossy); walrelay maps "
     "every element", "Where walrelay differs from Debezium"},
    {Why::kIntended, "string", "decimals", "*.na2", "", "null",
     "Debezium publishes a numeric array with a NaN/Infinity element as null (lossy); walrelay maps "
     "every element", "Where walrelay differs from Debezium"},
    {Why::kIntended, "double", "decimals", "*.na", "", "null",
     "Debezium publishes a numeric array with a NaN/Infinity element as null (lossy); walrelay maps "
     "every element", "Where walrelay differs from Debezium"},
    {Why::kIntended, "double", "decimals", "*.na2", "", "null",
     "Debezium publishes a numeric array with a NaN/Infinity element as null (lossy); walrelay maps "
     "every element", "Where walrelay differs from Debezium"},
    // ========================================================================= NOT YET FIXED
    // walrelay bugs not yet fixed. Observed values in the comments; each entry goes when it is fixed.

    // (none: every difference found so far is fixed)
};
// clang-format on

}  // namespace walrelay::itest
