// Data-driven integration tests over the real-world case corpus: the registry of cases
// (case_corpus.hpp; the cases are in cases_*.cpp) and the parameterised test that runs each.

#include "case_corpus.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace walrelay::itest {
namespace {

const std::map<std::string, CaseFn>& cases() {
  static const std::map<std::string, CaseFn> all = {
      {"BUG-01", bug01},   {"BUG-03", bug03},   {"BUG-04", bug04},   {"BUG-05", bug05},
      {"BUG-07", bug07},   {"BUG-09", bug09},   {"BUG-10", bug10},   {"BUG-11", bug11},
      {"BUG-12", bug12},   {"BUG-14", bug14},   {"BUG-15", bug15},   {"BUG-17", bug17},
      {"BUG-18", bug18},   {"BUG-20", bug20},   {"BUG-22", bug22},   {"BUG-23", bug23},
      {"BUG-24", bug24},   {"BUG-27", bug27},   {"CASE-01", case01}, {"CASE-05", case05},
      {"CASE-06", case06}, {"CASE-09", case09},
  };
  return all;
}

TEST_P(CaseCorpusTest, Run) {
  const auto it = cases().find(GetParam());
  ASSERT_NE(it, cases().end()) << "no expectations for " << GetParam();
  it->second(*this);
}

std::vector<std::string> case_ids() {
  std::vector<std::string> ids;
  for (const auto& [id, fn] : cases()) ids.push_back(id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CaseCorpusTest, ::testing::ValuesIn(case_ids()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return replace_all(param_info.param, "-", "_");
                         });

}  // namespace
}  // namespace walrelay::itest
