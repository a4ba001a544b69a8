#include "stoc/server/file_catalog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::stoc {
namespace {

namespace fs = std::filesystem;

// Record types as persisted (file_catalog.cc); the tests build records by hand to pin
// the on-disk format and to plant damage.
constexpr uint8_t kCreateType = 1;
constexpr uint8_t kDeleteType = 2;

std::string Record(uint8_t type, std::string_view payload) {
  std::string covered(1, static_cast<char>(type));
  covered.append(payload);
  std::string rec;
  PutFixed32(&rec, crc32c::Mask(crc32c::Value(covered)));
  PutFixed32(&rec, static_cast<uint32_t>(payload.size()));
  rec += covered;
  return rec;
}

std::string CreatePayload(uint64_t id, FileKind kind, std::string_view name) {
  std::string p;
  PutFixed64(&p, id);
  p.push_back(static_cast<char>(kind));
  PutLengthPrefixed(&p, name);
  return p;
}

std::string IdPayload(uint64_t id) {
  std::string p;
  PutFixed64(&p, id);
  return p;
}

class FileCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (fs::path(::testing::TempDir()) /
            ("file_catalog_test." + std::string(info->name()) + "." + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string CatalogPath() const { return dir_ + "/CATALOG"; }

  std::unique_ptr<FileCatalog> MustOpen(const FileCatalogOptions& options = {}) {
    auto r = FileCatalog::Open(dir_, options);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }

  uint64_t MustAdd(FileCatalog* catalog, std::string_view name, FileKind kind = FileKind::kDisk) {
    auto r = catalog->AddFile(name, kind);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    return r.ok() ? *r : 0;
  }

  std::string ReadCatalog() const {
    std::ifstream in(CatalogPath(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void WriteCatalog(const std::string& contents) const {
    fs::create_directories(dir_);
    std::ofstream out(CatalogPath(), std::ios::binary | std::ios::trunc);
    out << contents;
    out.close();
    ASSERT_TRUE(out.good()) << "cannot write " << CatalogPath();
  }

  std::string dir_;
};

std::vector<std::string> Names(const std::vector<FileEntry>& entries) {
  std::vector<std::string> names;
  for (const auto& e : entries) names.push_back(e.name);
  return names;
}

TEST_F(FileCatalogTest, AddLookupGetList) {
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_TRUE(catalog->List().empty());
  EXPECT_EQ(1u, catalog->next_file_id());

  EXPECT_EQ(1u, MustAdd(catalog.get(), "r1-t5-f0-rep0", FileKind::kDisk));
  EXPECT_EQ(2u, MustAdd(catalog.get(), "log.7", FileKind::kMemory));

  auto e = catalog->Lookup("log.7");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ((FileEntry{2, FileKind::kMemory, "log.7"}), *e);
  EXPECT_EQ((FileEntry{1, FileKind::kDisk, "r1-t5-f0-rep0"}), catalog->Get(1));
  EXPECT_FALSE(catalog->Lookup("nope").has_value());
  EXPECT_FALSE(catalog->Get(3).has_value());
  EXPECT_EQ((std::vector<std::string>{"r1-t5-f0-rep0", "log.7"}), Names(catalog->List()));

  ASSERT_TRUE(catalog->RemoveFile(1).ok());
  EXPECT_FALSE(catalog->Get(1).has_value());
  EXPECT_FALSE(catalog->Lookup("r1-t5-f0-rep0").has_value());
  EXPECT_EQ((std::vector<std::string>{"log.7"}), Names(catalog->List()));
}

TEST_F(FileCatalogTest, DuplicateLiveNameIsAlreadyExists) {
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ(1u, MustAdd(catalog.get(), "a"));
  auto dup = catalog->AddFile("a", FileKind::kMemory);
  EXPECT_EQ(Status::Code::kAlreadyExists, dup.status().code());
  // Once removed, the name may come back, under a new id.
  ASSERT_TRUE(catalog->RemoveFile(1).ok());
  EXPECT_EQ(2u, MustAdd(catalog.get(), "a"));
}

TEST_F(FileCatalogTest, RemoveUnknownIsNotFound) {
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_TRUE(catalog->RemoveFile(1).IsNotFound());
  const uint64_t id = MustAdd(catalog.get(), "a");
  ASSERT_TRUE(catalog->RemoveFile(id).ok());
  EXPECT_TRUE(catalog->RemoveFile(id).IsNotFound());
  EXPECT_TRUE(catalog->RemoveFile(0).IsNotFound());
}

TEST_F(FileCatalogTest, BadNamesAndKindsAreRejected) {
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  const std::vector<std::string> bad = {
      "", std::string(kMaxFileNameBytes + 1, 'x'), "a/b", "a b", ".", "..", "../x",
      std::string("a\0b", 3), "caf\xc3\xa9", "tab\t", "star*"};
  for (const auto& name : bad) {
    auto r = catalog->AddFile(name, FileKind::kDisk);
    EXPECT_EQ(Status::Code::kInvalidArgument, r.status().code()) << "name: " << name;
  }
  auto bad_kind = catalog->AddFile("ok", static_cast<FileKind>(7));
  EXPECT_EQ(Status::Code::kInvalidArgument, bad_kind.status().code());
  EXPECT_TRUE(catalog->List().empty());
  EXPECT_EQ(1u, catalog->next_file_id());  // rejected calls consume no id

  EXPECT_TRUE(ValidateFileName(std::string(kMaxFileNameBytes, 'z')).ok());
  EXPECT_TRUE(ValidateFileName("AZaz09._-").ok());
  EXPECT_TRUE(ValidateFileName("...").ok());
  EXPECT_EQ(1u, MustAdd(catalog.get(), std::string(kMaxFileNameBytes, 'z')));
}

TEST_F(FileCatalogTest, PersistedFormat) {
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "ab", FileKind::kDisk);
    ASSERT_TRUE(catalog->RemoveFile(1).ok());
  }
  const std::string expected = Record(kCreateType, CreatePayload(1, FileKind::kDisk, "ab")) +
                               Record(kDeleteType, IdPayload(1));
  EXPECT_EQ(expected, ReadCatalog());
  // Spelled out once, so a change to the encoders above cannot hide a format change.
  const std::string create_payload("\x01\0\0\0\0\0\0\0\x02\x02" "ab", 12);
  EXPECT_EQ(create_payload, CreatePayload(1, FileKind::kDisk, "ab"));
  EXPECT_EQ(std::string("\x0c\0\0\0\x01", 5), Record(kCreateType, create_payload).substr(4, 5));
}

TEST_F(FileCatalogTest, ReopenKeepsEntries) {
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a", FileKind::kDisk);
    MustAdd(catalog.get(), "b", FileKind::kMemory);
    MustAdd(catalog.get(), "c", FileKind::kDisk);
    ASSERT_TRUE(catalog->RemoveFile(2).ok());
  }
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  const std::vector<FileEntry> expected = {{1, FileKind::kDisk, "a"}, {3, FileKind::kDisk, "c"}};
  EXPECT_EQ(expected, catalog->List());
  EXPECT_EQ(3u, catalog->Lookup("c")->file_id);
  EXPECT_EQ(4u, catalog->next_file_id());
}

TEST_F(FileCatalogTest, IdsAreNeverReused) {
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
    MustAdd(catalog.get(), "b");
    MustAdd(catalog.get(), "c");
    // Delete the newest, then everything: the next id must still be 4.
    ASSERT_TRUE(catalog->RemoveFile(3).ok());
    ASSERT_TRUE(catalog->RemoveFile(1).ok());
    ASSERT_TRUE(catalog->RemoveFile(2).ok());
    EXPECT_EQ(4u, MustAdd(catalog.get(), "c"));
    ASSERT_TRUE(catalog->RemoveFile(4).ok());
  }
  for (uint64_t expected : {5u, 6u}) {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    EXPECT_TRUE(catalog->List().empty());
    const uint64_t id = MustAdd(catalog.get(), "c");
    EXPECT_EQ(expected, id);
    ASSERT_TRUE(catalog->RemoveFile(id).ok());
  }
}

TEST_F(FileCatalogTest, TornTailAtEveryCutIsTruncated) {
  uint64_t two_records = 0;
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
    MustAdd(catalog.get(), "b");
    two_records = fs::file_size(CatalogPath());
    MustAdd(catalog.get(), "the-torn-one");
  }
  const std::string full = ReadCatalog();
  for (size_t cut = two_records; cut < full.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    WriteCatalog(full.substr(0, cut));
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    EXPECT_EQ((std::vector<std::string>{"a", "b"}), Names(catalog->List()));
    EXPECT_EQ(two_records, fs::file_size(CatalogPath()));
    // The torn record was never acknowledged, so its id is free.
    EXPECT_EQ(3u, catalog->next_file_id());
  }
  // And the log is usable afterwards.
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    EXPECT_EQ(3u, MustAdd(catalog.get(), "d"));
  }
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ((std::vector<std::string>{"a", "b", "d"}), Names(catalog->List()));
}

TEST_F(FileCatalogTest, ChecksumBadLastRecordIsTornTail) {
  uint64_t one_record = 0;
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
    one_record = fs::file_size(CatalogPath());
    MustAdd(catalog.get(), "b");
  }
  std::string contents = ReadCatalog();
  contents.back() ^= 0x40;  // inside the last record's name
  WriteCatalog(contents);
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ((std::vector<std::string>{"a"}), Names(catalog->List()));
  EXPECT_EQ(one_record, fs::file_size(CatalogPath()));
}

TEST_F(FileCatalogTest, ZeroFilledTailIsTornTail) {
  uint64_t one_record = 0;
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
    one_record = fs::file_size(CatalogPath());
    MustAdd(catalog.get(), "bbbbbbbb");
  }
  // A filesystem grew the file but the last record's bytes and more never arrived.
  std::string contents = ReadCatalog();
  const size_t zero_from = one_record + 12;  // mid-record
  contents.replace(zero_from, std::string::npos, 4096, '\0');
  WriteCatalog(contents);
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ((std::vector<std::string>{"a"}), Names(catalog->List()));
  EXPECT_EQ(one_record, fs::file_size(CatalogPath()));
}

TEST_F(FileCatalogTest, MidFileCorruptionFailsOpen) {
  uint64_t one_record = 0;
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
    one_record = fs::file_size(CatalogPath());
    MustAdd(catalog.get(), "b");
    MustAdd(catalog.get(), "c");
  }
  const std::string good = ReadCatalog();
  struct Damage {
    size_t offset;       // byte to flip
    uint64_t reported;   // offset of the record the error must name
  };
  const std::vector<Damage> damages = {
      {one_record - 1, 0},                  // first record's name
      {one_record + 9, one_record},         // second record's file id
      {one_record + 6, one_record},         // second record's length field
      {0, 0},                               // first record's checksum
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE("flip at " + std::to_string(d.offset));
    std::string bad = good;
    bad[d.offset] ^= 0x01;
    WriteCatalog(bad);
    auto r = FileCatalog::Open(dir_);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(std::string::npos,
              r.status().message().find("offset " + std::to_string(d.reported)))
        << r.status().ToString();
    EXPECT_EQ(bad, ReadCatalog()) << "a corrupt catalog must be left as it is";
  }
}

TEST_F(FileCatalogTest, HugeLengthFieldMidFileIsCorruption) {
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
    MustAdd(catalog.get(), "b");
  }
  std::string contents = ReadCatalog();
  EncodeFixed32(contents.data() + 4, 0xffffffffu);  // first record's length
  WriteCatalog(contents);
  auto r = FileCatalog::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(std::string::npos, r.status().message().find("offset 0"));
}

TEST_F(FileCatalogTest, WellFormedButMeaninglessRecordsAreCorruption) {
  const std::string create_a = Record(kCreateType, CreatePayload(1, FileKind::kDisk, "a"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unknown type", Record(9, IdPayload(1))},
      {"unknown kind", Record(kCreateType, CreatePayload(2, static_cast<FileKind>(3), "b"))},
      {"bad name", Record(kCreateType, CreatePayload(2, FileKind::kDisk, "b/c"))},
      {"reused id", Record(kCreateType, CreatePayload(1, FileKind::kDisk, "b"))},
      {"duplicate name", Record(kCreateType, CreatePayload(2, FileKind::kDisk, "a"))},
      {"delete of unknown id", Record(kDeleteType, IdPayload(5))},
      {"trailing bytes", Record(kDeleteType, IdPayload(1) + "x")},
  };
  for (const auto& [what, record] : cases) {
    SCOPED_TRACE(what);
    // A good checksum means no torn write: even as the last record this is damage.
    WriteCatalog(create_a + record);
    auto r = FileCatalog::Open(dir_);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(std::string::npos,
              r.status().message().find("offset " + std::to_string(create_a.size())))
        << r.status().ToString();
  }
}

TEST_F(FileCatalogTest, EmptyExistingFileOpens) {
  WriteCatalog("");
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_TRUE(catalog->List().empty());
  EXPECT_EQ(1u, catalog->next_file_id());
}

TEST_F(FileCatalogTest, OpenCreatesNestedDirectory) {
  dir_ += "/nested/deeper";
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_TRUE(fs::exists(CatalogPath()));
}

TEST_F(FileCatalogTest, RewriteKeepsEntriesAndNextId) {
  FileCatalogOptions options;
  options.min_rewrite_records = 8;
  std::vector<FileEntry> kept;
  {
    auto catalog = MustOpen(options);
    ASSERT_NE(catalog, nullptr);
    for (const char* name : {"k1", "k2", "k3"}) {
      const uint64_t id = MustAdd(catalog.get(), name, FileKind::kMemory);
      kept.push_back({id, FileKind::kMemory, name});
    }
    // Churn: 40 more records. The log must never hold more than the threshold.
    for (int i = 0; i < 20; ++i) {
      const uint64_t id = MustAdd(catalog.get(), "churn");
      ASSERT_TRUE(catalog->RemoveFile(id).ok());
      EXPECT_LE(catalog->log_records(), options.min_rewrite_records);
    }
    // The newest id (23) is deleted, so only the next-id record remembers it.
    EXPECT_EQ(24u, catalog->next_file_id());
    EXPECT_EQ(kept, catalog->List());
  }
  EXPECT_FALSE(fs::exists(dir_ + "/CATALOG.tmp"));
  for (int round = 0; round < 2; ++round) {
    auto catalog = MustOpen(options);
    ASSERT_NE(catalog, nullptr);
    EXPECT_EQ(kept, catalog->List());
    EXPECT_EQ(24u + round, catalog->next_file_id());
    const uint64_t id = MustAdd(catalog.get(), "after-reopen");
    EXPECT_EQ(24u + round, id);
    ASSERT_TRUE(catalog->RemoveFile(id).ok());
  }
}

TEST_F(FileCatalogTest, OpenRewritesAnOversizedLog) {
  {
    auto catalog = MustOpen();  // default threshold: no rewrite for a short log
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "keep");
    for (int i = 0; i < 15; ++i) {
      ASSERT_TRUE(catalog->RemoveFile(MustAdd(catalog.get(), "churn")).ok());
    }
    EXPECT_EQ(31u, catalog->log_records());
  }
  FileCatalogOptions small;
  small.min_rewrite_records = 4;
  {
    auto catalog = MustOpen(small);
    ASSERT_NE(catalog, nullptr);
    EXPECT_EQ(2u, catalog->log_records());  // one create + the next id
  }
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ((std::vector<std::string>{"keep"}), Names(catalog->List()));
  EXPECT_EQ(17u, catalog->next_file_id());
}

TEST_F(FileCatalogTest, LeftoverTempFileIsRemoved) {
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    MustAdd(catalog.get(), "a");
  }
  {
    std::ofstream tmp(dir_ + "/CATALOG.tmp", std::ios::binary);
    tmp << "half a rewrite";
  }
  auto catalog = MustOpen();
  ASSERT_NE(catalog, nullptr);
  EXPECT_FALSE(fs::exists(dir_ + "/CATALOG.tmp"));
  EXPECT_EQ((std::vector<std::string>{"a"}), Names(catalog->List()));
}

TEST_F(FileCatalogTest, ConcurrentAddsGetDistinctIds) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 24;
  FileCatalogOptions options;
  options.min_rewrite_records = 16;  // rewrites happen under contention too
  {
    auto catalog = MustOpen(options);
    ASSERT_NE(catalog, nullptr);
    std::vector<std::thread> threads;
    std::vector<std::vector<uint64_t>> ids(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          auto r = catalog->AddFile("t" + std::to_string(t) + "-" + std::to_string(i),
                                    FileKind::kDisk);
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          ids[t].push_back(*r);
          if (i % 2 == 0) {
            EXPECT_TRUE(catalog->RemoveFile(*r).ok());
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    std::set<uint64_t> all;
    for (const auto& v : ids) all.insert(v.begin(), v.end());
    EXPECT_EQ(static_cast<size_t>(kThreads * kPerThread), all.size());
    EXPECT_EQ(1u, *all.begin());
    EXPECT_EQ(static_cast<uint64_t>(kThreads * kPerThread), *all.rbegin());
  }
  auto catalog = MustOpen(options);
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ(static_cast<size_t>(kThreads * kPerThread / 2), catalog->List().size());
  EXPECT_EQ(static_cast<uint64_t>(kThreads * kPerThread + 1), catalog->next_file_id());
}

TEST_F(FileCatalogTest, FencesPersistNeverGoBackAndSurviveRewrites) {
  FileCatalogOptions options;
  options.min_rewrite_records = 8;
  {
    auto catalog = MustOpen(options);
    ASSERT_NE(catalog, nullptr);
    ASSERT_TRUE(catalog->SetFence(3, 2).ok());
    ASSERT_TRUE(catalog->SetFence(3, 5).ok());
    ASSERT_TRUE(catalog->SetFence(9, 1).ok());
    const uint64_t records = catalog->log_records();
    EXPECT_TRUE(catalog->SetFence(3, 5).ok());  // already held: nothing written
    EXPECT_EQ(records, catalog->log_records());
    EXPECT_EQ(catalog->SetFence(3, 4).code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(catalog->SetFence(4, 0).code(), Status::Code::kInvalidArgument);
    // Churn until the log is rewritten (more than once): the fences are kept.
    for (int i = 0; i < 20; ++i) {
      const uint64_t id = MustAdd(catalog.get(), "churn");
      ASSERT_TRUE(catalog->RemoveFile(id).ok());
    }
    EXPECT_LE(catalog->log_records(), options.min_rewrite_records);
  }
  auto catalog = MustOpen(options);
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ(catalog->Fences(), (std::map<uint32_t, uint64_t>{{3, 5}, {9, 1}}));
}

TEST_F(FileCatalogTest, FenceRecordFormatAndAFenceGoingBackIsCorruption) {
  // kFence (4): range u32 | epoch u64. DO NOT CHANGE: persisted.
  auto fence = [](uint32_t range, uint64_t epoch) {
    std::string p;
    PutFixed32(&p, range);
    PutFixed64(&p, epoch);
    return Record(4, p);
  };
  WriteCatalog(fence(7, 3) + fence(7, 4));
  {
    auto catalog = MustOpen();
    ASSERT_NE(catalog, nullptr);
    EXPECT_EQ(catalog->Fences(), (std::map<uint32_t, uint64_t>{{7, 4}}));
  }
  WriteCatalog(fence(7, 4) + fence(7, 3));
  auto r = FileCatalog::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
}

}  // namespace
}  // namespace nova::stoc
