// LocalFiles against a scripted kLocalFile answer: which answers it trusts, what it
// remembers about a StoC, and when it lets go of a descriptor. The StoC end to end is in
// stoc/server/stoc_server_test.cc (LocalReads*).
#include "stoc/client/local_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "common/coding.h"
#include "common/crc32c.h"
#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

class LocalFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::TestTempDir("local_files_test");
    auto id = HostIdentity();
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    host_ = id.value();
  }
  // Writes `data` to a file of the directory and returns the answer a StoC would give.
  LocalFileResponse MakeFile(const std::string& name, const std::string& data) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << data;
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return LocalFileResponse{{}, host_, path, static_cast<uint64_t>(st.st_dev),
                             static_cast<uint64_t>(st.st_ino)};
  }
  LocalFiles::Locate Scripted() {
    return [this](uint32_t stoc_id, uint64_t file_id) -> Result<LocalFileResponse> {
      ++asked_[stoc_id];
      auto it = answers_.find({stoc_id, file_id});
      if (it == answers_.end()) return Status::NotFound("no such file");
      return it->second;
    };
  }

  std::string dir_;
  std::string host_;
  std::map<std::pair<uint32_t, uint64_t>, Result<LocalFileResponse>> answers_;
  std::map<uint32_t, int> asked_;
};

TEST_F(LocalFilesTest, ReadsAFileOfThisHostWithPread) {
  answers_.emplace(std::make_pair(1u, 7ull), MakeFile("a.dat", "0123456789"));
  LocalFiles files(Scripted());
  char buf[4];
  ASSERT_TRUE(files.Read(1, 7, 3, 4, buf));
  EXPECT_EQ(std::string(buf, 4), "3456");
  ASSERT_TRUE(files.Read(1, 7, 0, 2, buf));
  EXPECT_EQ(std::string(buf, 2), "01");
  EXPECT_EQ(asked_[1], 1) << "the descriptor is kept";
  EXPECT_EQ(files.local_reads(), 2u);
  EXPECT_EQ(files.open_files(), 1u);
  // Past the end of the file (never an acknowledged block): the request answers instead.
  EXPECT_FALSE(files.Read(1, 7, 8, 4, buf));
}

TEST_F(LocalFilesTest, AnotherHostOrAnotherFileIsReadByRequest) {
  LocalFileResponse other_host = MakeFile("b.dat", "bbbb");
  other_host.host_id = "another-boot net:1";
  answers_.emplace(std::make_pair(1u, 1ull), other_host);
  answers_.emplace(std::make_pair(1u, 2ull), MakeFile("b2.dat", "bbbb"));
  LocalFileResponse wrong_inode = MakeFile("c.dat", "cccc");
  wrong_inode.inode += 1;  // the path holds another file here
  answers_.emplace(std::make_pair(2u, 1ull), wrong_inode);
  answers_.emplace(std::make_pair(2u, 2ull), MakeFile("c2.dat", "cccc"));
  answers_.emplace(std::make_pair(3u, 1ull), Result<LocalFileResponse>(Status::NotSupported("old")));
  LocalFileResponse no_dir = MakeFile("d.dat", "dddd");
  no_dir.path = dir_ + "/no-such-dir/d.dat";
  answers_.emplace(std::make_pair(4u, 1ull), no_dir);
  LocalFiles files(Scripted());
  char buf[4];
  for (uint32_t stoc : {1u, 2u, 3u, 4u}) {
    EXPECT_FALSE(files.Read(stoc, 1, 0, 4, buf)) << stoc;
    // The whole StoC is remembered as remote: its next file is not asked about.
    EXPECT_FALSE(files.Read(stoc, 2, 0, 4, buf)) << stoc;
    EXPECT_EQ(asked_[stoc], 1) << stoc;
  }
  EXPECT_EQ(files.open_files(), 0u);
  EXPECT_EQ(files.local_reads(), 0u);
}

TEST_F(LocalFilesTest, AFileDeletedBeforeItIsOpenedIsThatFileOnly) {
  LocalFileResponse gone = MakeFile("gone.dat", "gggg");
  ASSERT_EQ(::unlink(gone.path.c_str()), 0);
  answers_.emplace(std::make_pair(1u, 1ull), gone);
  answers_.emplace(std::make_pair(1u, 2ull), MakeFile("here.dat", "hhhh"));
  LocalFiles files(Scripted());
  char buf[4];
  EXPECT_FALSE(files.Read(1, 1, 0, 4, buf));
  EXPECT_FALSE(files.Read(1, 3, 0, 4, buf));  // unknown to the StoC (NotFound)
  EXPECT_TRUE(files.Read(1, 2, 0, 4, buf));
  EXPECT_FALSE(files.Read(1, 1, 0, 4, buf));  // remembered until the next sweep
  EXPECT_EQ(asked_[1], 3);
  files.Sweep();
  EXPECT_FALSE(files.Read(1, 1, 0, 4, buf));
  EXPECT_EQ(asked_[1], 4) << "a sweep forgets what was unknown";
}

TEST_F(LocalFilesTest, SweepClosesUnlinkedFilesAndForgetStocClosesAll) {
  LocalFileResponse a = MakeFile("a.dat", "aaaa");
  answers_.emplace(std::make_pair(1u, 1ull), a);
  answers_.emplace(std::make_pair(1u, 2ull), MakeFile("b.dat", "bbbb"));
  answers_.emplace(std::make_pair(2u, 1ull), MakeFile("c.dat", "cccc"));
  LocalFiles files(Scripted());
  char buf[4];
  ASSERT_TRUE(files.Read(1, 1, 0, 4, buf));
  ASSERT_TRUE(files.Read(1, 2, 0, 4, buf));
  ASSERT_TRUE(files.Read(2, 1, 0, 4, buf));
  ASSERT_EQ(::unlink(a.path.c_str()), 0);
  // Still readable through the descriptor until a sweep closes it (as the StoC's own
  // readers of a deleted file).
  EXPECT_TRUE(files.Read(1, 1, 0, 4, buf));
  files.Sweep();
  EXPECT_EQ(files.open_files(), 2u);
  EXPECT_FALSE(files.Read(1, 1, 0, 4, buf)) << "reopened: the path is gone";
  files.ForgetStoc(1);
  EXPECT_EQ(files.open_files(), 1u);
  const int asked = asked_[1];
  EXPECT_FALSE(files.Read(1, 2, 0, 4, buf)) << "a StoC that went down is read by request";
  EXPECT_EQ(asked_[1], asked);
  EXPECT_TRUE(files.Read(2, 1, 0, 4, buf)) << "other StoCs are not affected";
  // After kDownInterval its files are located again.
  ASSERT_TRUE(test::WaitFor([&] { return files.Read(1, 2, 0, 4, buf); },
                            LocalFiles::kDownInterval * 5));
  EXPECT_EQ(std::string(buf, 4), "bbbb");
}

// A read of a whole StoC block is checked against the CRC in its header (as the StoC
// checks those); a read of part of a block has no CRC to check.
TEST_F(LocalFilesTest, AWholeBlockIsCheckedAgainstItsHeader) {
  const std::string block = "the block's data";
  auto file_with = [&](uint32_t crc) {
    std::string f(8, '\0');
    EncodeFixed32(&f[0], static_cast<uint32_t>(block.size()));
    EncodeFixed32(&f[4], crc);
    return f + block;
  };
  answers_.emplace(std::make_pair(1u, 1ull),
                   MakeFile("good.dat", file_with(crc32c::Mask(crc32c::Value(block)))));
  answers_.emplace(std::make_pair(1u, 2ull),
                   MakeFile("bad.dat", file_with(crc32c::Mask(crc32c::Value(block)) + 1)));
  LocalFiles files(Scripted());
  std::string buf(block.size(), '\0');
  ASSERT_TRUE(files.Read(1, 1, 8, block.size(), buf.data()));
  EXPECT_EQ(buf, block);
  EXPECT_FALSE(files.Read(1, 2, 8, block.size(), buf.data())) << "the request reports it";
  ASSERT_TRUE(files.Read(1, 2, 9, 4, buf.data())) << "part of a block: nothing to check";
  EXPECT_EQ(buf.substr(0, 4), block.substr(1, 4));
}

// Map: one mapping per descriptor, its bytes in place; nothing past the file's size when
// mapped; it outlives the file's deletion, the sweep that closes the descriptor and the
// LocalFiles itself, and is counted while it exists.
TEST_F(LocalFilesTest, MapsAFileForReadsInPlace) {
  LocalFileResponse a = MakeFile("a.dat", "0123456789");
  answers_.emplace(std::make_pair(1u, 7ull), a);
  answers_.emplace(std::make_pair(1u, 8ull), MakeFile("empty.dat", ""));
  LocalFileResponse other_host = MakeFile("b.dat", "bbbb");
  other_host.host_id = "another-boot net:1";
  answers_.emplace(std::make_pair(2u, 1ull), other_host);
  auto files = std::make_unique<LocalFiles>(Scripted());
  std::shared_ptr<const MappedFile> m = files->Map(1, 7);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->size(), 10u);
  const char* p = m->Find(3, 4);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::string(p, 4), "3456");
  EXPECT_EQ(m->Find(8, 4), nullptr) << "past the mapping: read otherwise";
  EXPECT_EQ(m->Find(11, 0), nullptr);
  EXPECT_EQ(files->Map(1, 7), m) << "one mapping per descriptor";
  EXPECT_EQ(asked_[1], 1);
  EXPECT_EQ(files->live_mappings(), 1u);
  EXPECT_EQ(files->Map(1, 8), nullptr) << "an empty file has nothing to map";
  EXPECT_EQ(files->Map(2, 1), nullptr) << "another host's file";
  EXPECT_EQ(files->live_mappings(), 1u);

  // Grown since: the mapping still holds what it held (its end is where reads fall back).
  { std::ofstream(a.path, std::ios::app) << "abc"; }
  EXPECT_EQ(files->Map(1, 7)->size(), 10u);

  ASSERT_EQ(::unlink(a.path.c_str()), 0);
  files->Sweep();
  EXPECT_EQ(files->open_files(), 1u) << "the empty file's descriptor is still open";
  EXPECT_EQ(std::string(m->Find(0, 10), 10), "0123456789") << "a deleted file stays mapped";
  EXPECT_EQ(files->Map(1, 7), nullptr) << "reopened: the path is gone";
  files.reset();
  EXPECT_EQ(std::string(m->Find(5, 5), 5), "56789") << "the mapping outlives its LocalFiles";
  m.reset();  // unmaps it; the count it updates is shared, so no LocalFiles is needed
}

TEST_F(LocalFilesTest, MappingsCountAndGoWithTheirLastHolder) {
  answers_.emplace(std::make_pair(1u, 1ull), MakeFile("a.dat", "aaaa"));
  answers_.emplace(std::make_pair(1u, 2ull), MakeFile("b.dat", "bbbb"));
  LocalFiles files(Scripted());
  std::shared_ptr<const MappedFile> a = files.Map(1, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(files.Map(1, 2), nullptr);
  EXPECT_EQ(files.live_mappings(), 2u) << "b's mapping is held by its descriptor";
  files.ForgetStoc(1);  // the descriptors go to the sweeping thread
  files.Sweep();
  EXPECT_EQ(files.open_files(), 0u);
  EXPECT_EQ(files.live_mappings(), 1u) << "only the mapping someone holds is left";
  a.reset();
  EXPECT_EQ(files.live_mappings(), 0u);
  EXPECT_GE(LocalFiles::MaxMappings(), 1u);
}

// A whole StoC block found in a mapping is checked against its header, as Read checks it.
TEST_F(LocalFilesTest, AWholeBlockInAMappingIsCheckedAgainstItsHeader) {
  const std::string block = "the block's data";
  std::string f(8, '\0');
  EncodeFixed32(&f[0], static_cast<uint32_t>(block.size()));
  EncodeFixed32(&f[4], crc32c::Mask(crc32c::Value(block)) + 1);
  answers_.emplace(std::make_pair(1u, 1ull), MakeFile("bad.dat", f + block));
  f.clear();
  f.resize(8);
  EncodeFixed32(&f[0], static_cast<uint32_t>(block.size()));
  EncodeFixed32(&f[4], crc32c::Mask(crc32c::Value(block)));
  answers_.emplace(std::make_pair(1u, 2ull), MakeFile("good.dat", f + block));
  LocalFiles files(Scripted());
  auto bad = files.Map(1, 1);
  auto good = files.Map(1, 2);
  ASSERT_NE(bad, nullptr);
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(bad->Find(8, block.size()), nullptr) << "the request reports the corruption";
  ASSERT_NE(bad->Find(9, 4), nullptr) << "part of a block: nothing to check";
  ASSERT_NE(good->Find(8, block.size()), nullptr);
  EXPECT_EQ(std::string(good->Find(8, block.size()), block.size()), block);
}

// A StoC that goes down while a file of it is being located: the answer is not used.
TEST_F(LocalFilesTest, ALocateUnderWayWhenTheStocGoesDownIsNotUsed) {
  answers_.emplace(std::make_pair(1u, 1ull), MakeFile("a.dat", "aaaa"));
  LocalFiles* files_ptr = nullptr;
  bool forget = true;
  LocalFiles files([&](uint32_t stoc_id, uint64_t file_id) -> Result<LocalFileResponse> {
    auto where = Scripted()(stoc_id, file_id);
    if (forget) files_ptr->ForgetStoc(stoc_id);  // as OnPeerDown would, meanwhile
    return where;
  });
  files_ptr = &files;
  char buf[4];
  EXPECT_FALSE(files.Read(1, 1, 0, 4, buf));
  EXPECT_EQ(files.open_files(), 0u);
  forget = false;
  ASSERT_TRUE(test::WaitFor([&] { return files.Read(1, 1, 0, 4, buf); },
                            LocalFiles::kDownInterval * 5));
  EXPECT_EQ(files.open_files(), 1u);
}

}  // namespace
}  // namespace nova::stoc
