#include "stoc/client/manifest_pointer.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

TEST(ManifestPointerTest, RoundTripsAndRejectsDamage) {
  const std::string dir = test::TestTempDir("manifest_pointer_test");
  ManifestPointer p(dir + "/manifests/r3.pointer");
  auto none = p.Load();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none.value(), ManifestPointer::Numbers{});
  ASSERT_TRUE(p.Store({7, 6}).ok());
  auto back = p.Load();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), (ManifestPointer::Numbers{7, 6}));
  ASSERT_TRUE(p.Store({1ull << 40, 1ull << 40}).ok());
  EXPECT_EQ(p.Load().value(), (ManifestPointer::Numbers{1ull << 40, 1ull << 40}));
  // A changed digit fails the checksum; garbage is not a pointer.
  for (const std::string& bad : {std::string("nova-manifest-pointer 1 9 6 1\n"),
                                std::string("hello\n"), std::string()}) {
    std::ofstream(p.path(), std::ios::trunc) << bad;
    EXPECT_TRUE(p.Load().status().IsCorruption()) << bad;
  }
}

}  // namespace
}  // namespace nova::stoc
