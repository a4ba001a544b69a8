#include "stoc/client/file_names.h"

#include <gtest/gtest.h>

#include "stoc/server/file_catalog.h"

namespace nova::stoc {
namespace {

TEST(FileNamesTest, RoundTripsAndAreValidCatalogNames) {
  const std::string frag = TableFragmentFileName({3, 123, 2, 1});
  EXPECT_EQ(frag, "r3-t000123-f2-p1");
  EXPECT_TRUE(ValidateFileName(frag).ok());
  ParsedFileName p = ParseStocFileName(frag);
  EXPECT_EQ(p.type, StocFileType::kTableFragment);
  EXPECT_EQ(p.range_id, 3u);
  EXPECT_EQ(p.number, 123u);
  EXPECT_EQ(p.fragment, 2u);
  EXPECT_EQ(p.replica, 1u);

  const std::string big = TableFragmentFileName({UINT32_MAX, 12345678901ull, 7, 0});
  p = ParseStocFileName(big);
  EXPECT_EQ(p.type, StocFileType::kTableFragment);
  EXPECT_EQ(p.number, 12345678901ull);
  EXPECT_EQ(p.range_id, UINT32_MAX);

  p = ParseStocFileName(ManifestFileName(9, 7));
  EXPECT_EQ(p.type, StocFileType::kManifest);
  EXPECT_EQ(p.range_id, 9u);
  EXPECT_EQ(p.number, 7u);
  EXPECT_TRUE(ValidateFileName(ManifestFileName(9, 7)).ok());

  p = ParseStocFileName(LogFileName(1, 42));
  EXPECT_EQ(p.type, StocFileType::kLog);
  EXPECT_EQ(p.number, 42u);
}

TEST(FileNamesTest, OtherNamesAreUnknown) {
  for (const char* n : {"", "r", "r3", "r3-t1", "r3-t1-f2", "r3-t1-f2-p", "r3-t1-f2-p1x",
                        "x3-t1-f2-p1", "r99999999999-t1-f2-p1", "r1-log-", "r1-manifest-abc",
                        "r1-t1-f99999999999-p0", "bench-file"}) {
    EXPECT_EQ(ParseStocFileName(n).type, StocFileType::kUnknown) << n;
  }
}

}  // namespace
}  // namespace nova::stoc
