// StocTableStore against four in-process StoCs over loopback: tables scattered, replicated,
// read back (also with a StoC stopped), deleted; the MANIFEST appended, rolled over, found
// again by a new store (as after an LTC restart) and repaired after failures (also around
// a stopped StoC); orphaned tables listed and collected.
#include "stoc/client/stoc_table_store.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "common/fault_point.h"
#include "common/lsm/manifest_format.h"
#include "common/lsm/table_store_test_util.h"
#include "stoc/client/file_names.h"
#include "stoc/server/stoc_server.h"
#include "tests/util/test_util.h"

namespace nova::stoc {
namespace {

constexpr char kSecret[] = "table-store-test-secret";
constexpr uint32_t kRange = 3;
constexpr uint32_t kNumStocs = 4;

// A MANIFEST record (the store does not look into payloads): "snapshot <n>" or "edit <n>".
std::string Record(bool snapshot, uint64_t n) {
  return lsm::FrameManifestRecord((snapshot ? "snapshot " : "edit ") + std::to_string(n));
}

class StocTableStoreTest : public ::testing::Test {
 protected:
  struct Node {
    std::unique_ptr<MetricsRegistry> metrics;  // declared first: outlives the server
    std::unique_ptr<StocServer> server;
    uint16_t port = 0;
  };

  void SetUp() override {
    dir_ = nova::test::TestTempDir("stoc_table_store_test");
    for (uint32_t id = 1; id <= kNumStocs; ++id) ASSERT_NO_FATAL_FAILURE(StartStoc(id));
    transport::TransportOptions o;
    o.node_name = "ltc";
    o.cluster_secret = kSecret;
    auto t = transport::NewTransport(o, &endpoint_);
    ASSERT_TRUE(t.ok());
    transport_ = std::move(t.value());
    endpoint_.Attach(transport_.get());
    StocClientOptions co;
    co.timeout = std::chrono::seconds(10);
    co.local_reads = local_reads_;
    co.map_local_files = map_local_files_;
    co.metrics = &client_metrics_;
    client_ = std::make_unique<StocClient>(&endpoint_, co);
    ASSERT_TRUE(transport_->Init().ok());
    ASSERT_TRUE(transport_->Start().ok());
    for (auto& [id, node] : nodes_) {
      ASSERT_TRUE(client_->AddStoc(id, node.server->address()).ok());
    }
  }
  void TearDown() override {
    FaultPoints::DisarmAll();
    transport_->Shutdown();
    nodes_.clear();
  }

  void StartStoc(uint32_t id) {
    Node& node = nodes_[id];
    StocOptions o;
    o.stoc_id = id;
    o.dir = dir_ + "/stoc" + std::to_string(id);
    o.transport.cluster_secret = kSecret;
    o.transport.listen_port = node.port;
    o.memory_region_bytes = 1 << 20;
    o.memory_limit_bytes = 4 << 20;
    o.file_buffer_bytes = 16 << 20;
    o.max_block_bytes = 4 << 20;
    node.metrics = std::make_unique<MetricsRegistry>();
    node.server = std::make_unique<StocServer>(o, node.metrics.get());
    Status s = node.server->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(node.server->Start().ok());
    const std::string addr = node.server->address();
    node.port = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
  }
  void StopStoc(uint32_t id) { nodes_[id].server.reset(); }
  // Restarts a stopped StoC on its port and directory; the client reconnects by itself.
  void RestartStoc(uint32_t id) {
    ASSERT_NO_FATAL_FAILURE(StartStoc(id));
    ASSERT_TRUE(
        nova::test::WaitFor([&] { return client_->Stats(id).ok(); }, std::chrono::seconds(20)));
  }

  // A store of range kRange unless the options name another.
  std::unique_ptr<StocTableStore> NewStore(StocTableStoreOptions o) {
    if (o.range_id == 0) o.range_id = kRange;
    if (o.stocs.empty()) o.stocs = {1, 2, 3, 4};
    auto store = std::make_unique<StocTableStore>(client_.get(), o);
    Status s = store->Init();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }
  // A new store holding table 7: 2000 random entries (seeded from `test`) with rho 3 and 2
  // replicas of each fragment. *m gets the entries, *meta the table.
  std::unique_ptr<StocTableStore> StoreWithTwoReplicaTable(const std::string& test,
                                                           lsm::table_test::TableModel* m,
                                                           lsm::TableMeta* meta) {
    std::mt19937_64 rng(nova::test::TestSeed(test.c_str()));
    StocTableStoreOptions o;
    o.fragment_replicas = 2;
    auto store = NewStore(o);
    *m = lsm::table_test::RandomTableModel(&rng, 2000, 300);
    *meta = WriteChecked(store.get(), 7, *m, 3, 2);
    return store;
  }
  // Names of the files at each running StoC.
  std::map<uint32_t, std::set<std::string>> Files() {
    std::map<uint32_t, std::set<std::string>> out;
    for (auto& [id, node] : nodes_) {
      if (!node.server) continue;
      auto list = client_->List(id);
      EXPECT_TRUE(list.ok()) << list.status().ToString();
      if (!list.ok()) continue;
      out[id];  // an empty StoC is listed too
      for (const auto& f : list.value()) out[id].insert(f.name);
    }
    return out;
  }
  // StoCs holding a file of the given type (and MANIFEST number, if not 0).
  std::set<uint32_t> Holders(StocFileType type, uint64_t number = 0) {
    std::set<uint32_t> out;
    for (const auto& [id, names] : Files()) {
      for (const auto& name : names) {
        const ParsedFileName p = ParseStocFileName(name);
        if (p.type == type && (number == 0 || p.number == number)) out.insert(id);
      }
    }
    return out;
  }
  // StoCs holding MANIFEST `number` of `range`.
  std::set<uint32_t> ManifestHolders(uint32_t range, uint64_t number) {
    std::set<uint32_t> out;
    const std::string name = ManifestFileName(range, number);
    for (const auto& [id, names] : Files()) {
      if (names.count(name) != 0) out.insert(id);
    }
    return out;
  }
  size_t CountFiles(StocFileType type) {
    size_t n = 0;
    for (const auto& [id, names] : Files()) {
      for (const auto& name : names) n += ParseStocFileName(name).type == type ? 1 : 0;
    }
    return n;
  }

  // Writes a random table and checks where its fragments landed.
  lsm::TableMeta WriteChecked(StocTableStore* store, uint64_t number,
                              const lsm::table_test::TableModel& m, uint32_t rho, int replicas) {
    lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, m, rho, bloom_.get());
    lsm::TableMeta meta;
    meta.number = number;
    meta.layout = built.layout;
    Status s = store->WriteTable(number, built, &meta);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return meta;
    EXPECT_EQ(meta.fragments.size(), rho + 1);
    std::set<uint32_t> data_primaries;
    const auto files = Files();
    for (uint32_t i = 0; i <= rho; ++i) {
      if (built.layout.FragmentSize(i) == 0) {
        EXPECT_TRUE(meta.fragments[i].empty()) << "an empty fragment got a file";
        continue;
      }
      EXPECT_EQ(meta.fragments[i].size(), static_cast<size_t>(replicas));
      std::set<uint32_t> at;
      for (uint32_t r = 0; r < meta.fragments[i].size(); ++r) {
        const lsm::FragmentLocation& loc = meta.fragments[i][r];
        at.insert(loc.stoc_id);
        const std::string name = TableFragmentFileName({kRange, number, i, r});
        EXPECT_EQ(files.count(loc.stoc_id) ? files.at(loc.stoc_id).count(name) : 0u, 1u) << name;
      }
      EXPECT_EQ(at.size(), meta.fragments[i].size())
          << "replicas of fragment " << i << " share a StoC";
      if (i < rho) data_primaries.insert(meta.fragments[i][0].stoc_id);
    }
    size_t non_empty = 0;
    for (uint32_t i = 0; i < rho; ++i) non_empty += built.layout.FragmentSize(i) ? 1 : 0;
    EXPECT_EQ(data_primaries.size(), non_empty) << "data fragments share a StoC";
    EXPECT_EQ(meta.filter.size(), static_cast<size_t>(replicas));
    for (uint32_t r = 0; r < meta.filter.size(); ++r) {
      EXPECT_EQ(meta.filter[r].stoc_id, meta.fragments[rho][r].stoc_id);
      EXPECT_EQ(meta.filter[r].file_id, meta.fragments[rho][r].file_id);
    }
    return meta;
  }

  std::string dir_;
  bool local_reads_ = false;  // the client's StocClientOptions::local_reads
  bool map_local_files_ = false;  // and its map_local_files
  MetricsRegistry client_metrics_;  // the client's counters
  std::map<uint32_t, Node> nodes_;
  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<StocClient> client_;
  const lsm::InternalKeyComparator icmp_{leveldb::BytewiseComparator()};
  std::unique_ptr<const leveldb::FilterPolicy> bloom_{leveldb::NewBloomFilterPolicy(10)};
};

TEST_F(StocTableStoreTest, TablesScatterReadBackAndDelete) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.TablesScatterReadBackAndDelete"));
  uint64_t number = 10;
  for (uint32_t rho : {1u, 3u}) {
    for (int replicas : {1, 2}) {
      SCOPED_TRACE("rho " + std::to_string(rho) + " R " + std::to_string(replicas));
      StocTableStoreOptions o;
      o.fragment_replicas = replicas;
      auto store = NewStore(o);
      const lsm::table_test::TableModel m = lsm::table_test::RandomTableModel(&rng, 2000, 300);
      const lsm::TableMeta meta = WriteChecked(store.get(), ++number, m, rho, replicas);
      ASSERT_FALSE(HasFailure());
      ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
      ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyFilter(store.get(), bloom_.get(), meta, m));
      // A table too small for rho fragments: the empty ones get no file.
      const lsm::table_test::TableModel tiny = {{"only", "one"}};
      const lsm::TableMeta small = WriteChecked(store.get(), ++number, tiny, rho, replicas);
      ASSERT_FALSE(HasFailure());
      ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, small, tiny));
      EXPECT_EQ(CountFiles(StocFileType::kTableFragment),
                static_cast<size_t>((rho + 1) * replicas + 2 * replicas));

      ASSERT_TRUE(store->DeleteTable(meta).ok());
      ASSERT_TRUE(store->DeleteTable(small).ok());
      EXPECT_EQ(CountFiles(StocFileType::kTableFragment), 0u);
      ASSERT_TRUE(store->DeleteTable(small).ok()) << "deleting again finds nothing to do";
      const StocTableStoreStats stats = store->GetStats();
      EXPECT_EQ(stats.tables_written, 2u);
      EXPECT_EQ(stats.tables_deleted, 3u);
      EXPECT_EQ(stats.fragment_files_written, static_cast<uint64_t>((rho + 3) * replicas));
      // Reading a deleted table fails cleanly.
      auto source = store->OpenTable(meta);
      ASSERT_TRUE(source.ok());
      std::unique_ptr<lsm::FragmentedTable> table;
      lsm::TableReadOptions ro;
      ro.comparator = &icmp_;
      EXPECT_FALSE(lsm::OpenTable(ro, meta.layout, source.value().get(), &table).ok());
    }
  }
}

// A fragment larger than a StoC block (4 MiB here) is written as consecutive appends
// (chunks) and read back, as a 16 MiB memtable flushed with rho = 1 would be; data blocks
// that straddle two chunks are read from both. With 1 KiB appends a small table's fragments
// and its filter all span many chunks.
TEST_F(StocTableStoreTest, FragmentsLargerThanAnAppend) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.FragmentsLargerThanAnAppend"));
  struct Case {
    const char* name;
    int entries;
    size_t value_bytes;
    size_t block_bytes;
    uint64_t max_append;
  };
  const Case cases[] = {
      {"10 MiB fragment, 4 MiB appends", 2600, 4096, 64 << 10, 4 << 20},
      {"1 KiB appends", 5000, 20, 1024, 1024},
      // One entry bigger than a StoC block (the fixture's StoCs take 4 MiB): its data block
      // is as big as the entry and is written and read in pieces.
      {"one 24 MiB entry", 1, 24 << 20, 4096, 4 << 20},
  };
  uint64_t number = 100;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    lsm::table_test::TableModel m;
    while (m.size() < static_cast<size_t>(c.entries)) {
      std::string value(c.value_bytes, '\0');
      for (char& ch : value) ch = static_cast<char>('a' + rng() % 26);
      m["key" + std::to_string(rng() % 1000000000)] = std::move(value);
    }
    StocTableStoreOptions o;
    o.fragment_replicas = 2;
    o.max_append_bytes = c.max_append;
    auto store = NewStore(o);
    lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, m, 1, bloom_.get(), c.block_bytes);
    ASSERT_GT(built.layout.FragmentSize(0), 2 * c.max_append) << "not larger than an append";
    lsm::TableMeta meta;
    meta.number = ++number;
    meta.layout = built.layout;
    Status s = store->WriteTable(meta.number, built, &meta);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(meta.fragments[0].size(), 2u);
    for (const lsm::FragmentLocation& loc : meta.fragments[0]) {
      EXPECT_EQ(loc.size, built.layout.FragmentSize(0)) << "one location for the whole fragment";
      EXPECT_EQ(loc.chunk_bytes, c.max_append);
      EXPECT_GE(loc.chunk_stride, c.max_append);
    }
    for (const lsm::FragmentLocation& loc : meta.filter) EXPECT_EQ(loc.size, built.filter.size());
    ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
    ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyFilter(store.get(), bloom_.get(), meta, m));
    ASSERT_TRUE(store->DeleteTable(meta).ok());
  }
}

TEST_F(StocTableStoreTest, ConcurrentWritersAndReaders) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.ConcurrentWritersAndReaders"));
  StocTableStoreOptions o;
  o.fragment_replicas = 2;
  o.io_threads = 3;
  auto store = NewStore(o);
  constexpr int kThreads = 4, kTablesEach = 3;
  std::vector<lsm::table_test::TableModel> models;
  for (int i = 0; i < kThreads * kTablesEach; ++i) {
    models.push_back(lsm::table_test::RandomTableModel(&rng, 500, 200));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kTablesEach; ++k) {
        const int i = t * kTablesEach + k;
        lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, models[i], 3, bloom_.get());
        lsm::TableMeta meta;
        meta.number = 100 + i;
        meta.layout = built.layout;
        Status s = store->WriteTable(meta.number, built, &meta);
        ASSERT_TRUE(s.ok()) << s.ToString();
        lsm::table_test::VerifyTable(store.get(), icmp_, meta, models[i]);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store->GetStats().tables_written, static_cast<uint64_t>(kThreads * kTablesEach));
}

TEST_F(StocTableStoreTest, ReadsFailOverWhenAStocStops) {
  lsm::table_test::TableModel m;
  lsm::TableMeta meta;
  auto store = StoreWithTwoReplicaTable("StocTableStoreTest.ReadsFailOverWhenAStocStops", &m, &meta);
  ASSERT_FALSE(HasFailure());
  // The StoC of the meta fragment's first replica (and of the filter's) goes away.
  const uint32_t victim = meta.fragments[3][0].stoc_id;
  StopStoc(victim);
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyFilter(store.get(), bloom_.get(), meta, m));
  EXPECT_GT(store->GetStats().read_failovers, 0u);
  // Deleting reports the unreachable StoC but removes the other replicas.
  EXPECT_FALSE(store->DeleteTable(meta).ok());
  EXPECT_EQ(CountFiles(StocFileType::kTableFragment), 0u);
}

// The LTC's configuration: the StoCs run on the client's host, so tables are read from
// their files (StocClient::ReadLocal), not by request; a StoC that stops is not read
// locally any more and reads fail over to the other replica as they do by request.
class StocTableStoreLocalReadsTest : public StocTableStoreTest {
 protected:
  StocTableStoreLocalReadsTest() { local_reads_ = true; }  // with pread, not mappings
};

TEST_F(StocTableStoreLocalReadsTest, TablesAreReadLocallyAndFailOverWhenAStocStops) {
  lsm::table_test::TableModel m;
  lsm::TableMeta meta;
  auto store = StoreWithTwoReplicaTable("StocTableStoreLocalReadsTest.TablesAreReadLocally", &m, &meta);
  ASSERT_FALSE(HasFailure());
  ASSERT_NE(client_->local_files(), nullptr);
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyFilter(store.get(), bloom_.get(), meta, m));
  EXPECT_GT(client_->local_files()->local_reads(), 0u);
  for (auto& [id, node] : nodes_) {
    EXPECT_EQ(client_->Stats(id)->reads, 0u) << "StoC " << id << " served a read request";
  }
  EXPECT_EQ(store->GetStats().read_failovers, 0u);

  // The StoC of the meta fragment's first replica (and of the filter's) goes away: once
  // its client sees it down, its files are not read locally, though they are still there.
  const uint32_t victim = meta.fragments[3][0].stoc_id;
  const size_t open_before = client_->local_files()->open_files();
  StopStoc(victim);
  ASSERT_TRUE(nova::test::WaitFor(
      [&] { return client_->local_files()->open_files() < open_before; }));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyFilter(store.get(), bloom_.get(), meta, m));
  EXPECT_GT(store->GetStats().read_failovers, 0u);
}

// The LTC's default: tables of StoCs on the client's host are read in place from
// mappings of their files (StocClient::MapLocal): no request, no pread, no copy. A source
// keeps its mappings while it is open, so a table whose StoC stops, or whose files are
// deleted, reads the same bytes until it is closed; then the mappings go.
class StocTableStoreMappedReadsTest : public StocTableStoreTest {
 protected:
  StocTableStoreMappedReadsTest() {
    local_reads_ = true;
    map_local_files_ = true;
  }
};

TEST_F(StocTableStoreMappedReadsTest, TablesAreReadInPlaceWhileTheirSourceIsOpen) {
  lsm::table_test::TableModel m;
  lsm::TableMeta meta;
  auto store = StoreWithTwoReplicaTable(
      "StocTableStoreMappedReadsTest.TablesAreReadInPlaceWhileTheirSourceIsOpen", &m, &meta);
  ASSERT_FALSE(HasFailure());
  LocalFiles* local = client_->local_files();
  ASSERT_NE(local, nullptr);
  Counter* mapped = client_metrics_.GetCounter("stoc_client_mapped_reads_total", "");
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
  EXPECT_GT(mapped->value(), 0u);
  for (auto& [id, node] : nodes_) {
    EXPECT_EQ(client_->Stats(id)->reads, 0u) << "StoC " << id << " served a read request";
  }

  // A source's reads point into the mapping, not into the caller's scratch.
  auto opened = store->OpenTable(meta);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<lsm::FragmentSource> source = std::move(opened.value());
  const size_t n = static_cast<size_t>(std::min<uint64_t>(meta.layout.FragmentSize(0), 1000));
  ASSERT_GT(n, 0u);
  std::string scratch(n, '\0');
  leveldb::Slice first;
  ASSERT_TRUE(source->ReadFragment(0, 0, n, scratch.data(), &first).ok());
  ASSERT_EQ(first.size(), n);
  EXPECT_NE(first.data(), scratch.data()) << "not read in place";
  const std::string expected = first.ToString();
  // Its first read of each fragment maps a replica of it.
  for (uint32_t i = 1; i < meta.fragments.size(); ++i) {
    if (meta.layout.FragmentSize(i) == 0) continue;
    leveldb::Slice byte;
    ASSERT_TRUE(source->ReadFragment(i, 0, 1, scratch.data(), &byte).ok()) << i;
    EXPECT_NE(byte.data(), scratch.data()) << "fragment " << i << " not read in place";
  }

  // The table's files are deleted and every StoC stops: the open source still reads the
  // same bytes and the whole table, from its mappings.
  ASSERT_TRUE(store->DeleteTable(meta).ok());
  local->Sweep();
  EXPECT_EQ(local->open_files(), 0u) << "the deleted files' descriptors are closed";
  EXPECT_GT(local->live_mappings(), 0u) << "the open source holds its mappings";
  for (uint32_t id = 1; id <= kNumStocs; ++id) StopStoc(id);
  leveldb::Slice again;
  ASSERT_TRUE(source->ReadFragment(0, 0, n, scratch.data(), &again).ok());
  EXPECT_EQ(again.ToString(), expected);
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifySource(source.get(), icmp_, meta, m));
  source.reset();
  EXPECT_EQ(local->live_mappings(), 0u) << "closing the table lets its mappings go";
}

TEST_F(StocTableStoreTest, PowerOfDPlacesFragmentsOnIdleStocs) {
  std::mt19937_64 rng(
      nova::test::TestSeed("StocTableStoreTest.PowerOfDPlacesFragmentsOnIdleStocs"));
  LoadView loads(std::chrono::hours(1));
  const MonoTime now = MonoNow();
  loads.Update(1, StocLoad{100, 1 << 20, now});
  loads.Update(2, StocLoad{80, 1 << 20, now});
  loads.Update(3, StocLoad{0, 0, now});
  loads.Update(4, StocLoad{1, 0, now});
  StocTableStoreOptions o;
  o.placement = lsm::PlacementPolicy::kPowerOfD;
  o.loads = &loads;
  auto store = NewStore(o);
  const lsm::table_test::TableModel m = lsm::table_test::RandomTableModel(&rng, 1000, 200);
  // rho = 2 samples d = 4, every StoC: the two idle ones win. The meta fragment samples
  // two StoCs and never lands on the busiest.
  for (uint64_t n = 1; n <= 8; ++n) {
    const lsm::TableMeta meta = WriteChecked(store.get(), n, m, 2, 1);
    ASSERT_FALSE(HasFailure());
    std::set<uint32_t> data = {meta.fragments[0][0].stoc_id, meta.fragments[1][0].stoc_id};
    EXPECT_EQ(data, (std::set<uint32_t>{3, 4}));
    EXPECT_NE(meta.fragments[2][0].stoc_id, 1u);
  }
  // Random placement ignores the loads and uses every StoC.
  o.placement = lsm::PlacementPolicy::kRandom;
  auto random = NewStore(o);
  std::set<uint32_t> used;
  for (uint64_t n = 101; n <= 120; ++n) {
    const lsm::TableMeta meta = WriteChecked(random.get(), n, m, 2, 1);
    ASSERT_FALSE(HasFailure());
    for (uint32_t i = 0; i < 2; ++i) used.insert(meta.fragments[i][0].stoc_id);
  }
  EXPECT_EQ(used.size(), kNumStocs);
}

TEST_F(StocTableStoreTest, FailedWriteLeavesNoFiles) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.FailedWriteLeavesNoFiles"));
  StocTableStoreOptions o;
  o.fragment_replicas = 2;
  auto store = NewStore(o);
  const lsm::table_test::TableModel m = lsm::table_test::RandomTableModel(&rng, 2000, 300);
  lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, m, 3, bloom_.get());
  lsm::TableMeta meta;
  meta.number = 9;
  meta.layout = built.layout;
  // The third append group any StoC writes fails: some files are written, one is not.
  ASSERT_TRUE(FaultPoints::Arm("stoc.storage=error:after=2:once").ok());
  Status s = store->WriteTable(9, built, &meta);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("writing table 9"), std::string::npos) << s.ToString();
  EXPECT_TRUE(meta.fragments.empty());
  EXPECT_EQ(CountFiles(StocFileType::kTableFragment), 0u);
  FaultPoints::DisarmAll();
  // Too few StoCs for the replicas.
  StocTableStoreOptions bad;
  bad.fragment_replicas = 5;
  StocTableStore unusable(client_.get(), bad);
  EXPECT_EQ(unusable.Init().code(), Status::Code::kInvalidArgument);
  // A retry under the same number succeeds.
  ASSERT_TRUE(store->WriteTable(9, built, &meta).ok());
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, meta, m));
}

TEST_F(StocTableStoreTest, ManifestSurvivesRestartAndRollOver) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  auto first = NewStore(o);
  auto empty = first->ReadManifest();
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty.value(), "");
  std::string want;
  for (const std::string& r : {Record(true, 1), Record(false, 2), Record(false, 3)}) {
    ASSERT_TRUE(first->AppendManifest(r).ok());
    want += r;
  }
  EXPECT_EQ(first->manifest_number(), 1u);
  EXPECT_EQ(Holders(StocFileType::kManifest, 1).size(), 2u);

  // A new store, as after an LTC restart, finds it and continues it.
  auto second = NewStore(o);
  auto got = second->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), want);
  ASSERT_TRUE(second->AppendManifest(Record(false, 4)).ok());
  want += Record(false, 4);
  EXPECT_EQ(NewStore(o)->ReadManifest().value(), want);

  // Roll-over: the new MANIFEST starts with the snapshot; the old one is gone.
  ASSERT_TRUE(second->RollManifest(Record(true, 10)).ok());
  ASSERT_TRUE(second->AppendManifest(Record(false, 11)).ok());
  EXPECT_EQ(second->manifest_number(), 2u);
  want = Record(true, 10) + Record(false, 11);
  auto third = NewStore(o);
  got = third->ReadManifest();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), want);
  lsm::ManifestFrames parsed;
  ASSERT_TRUE(lsm::ParseManifestFrames(got.value(), &parsed).ok());
  EXPECT_EQ(parsed.payloads.size(), 2u);
  EXPECT_EQ(Holders(StocFileType::kManifest, 2).size(), 2u);
  EXPECT_EQ(CountFiles(StocFileType::kManifest), 2u);
  // A store that appends without reading first finds the MANIFEST by itself.
  auto fourth = NewStore(o);
  ASSERT_TRUE(fourth->AppendManifest(Record(false, 12)).ok());
  EXPECT_EQ(NewStore(o)->ReadManifest().value(), want + Record(false, 12));
}

// MANIFEST records larger than a StoC block (a snapshot of many tables with big keys) are
// appended in pieces and read back whole, as a first record and as a later one.
TEST_F(StocTableStoreTest, ManifestRecordsLargerThanAStocBlock) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  auto store = NewStore(o);
  auto big = [](char c, size_t n) {
    std::string payload(n, c);
    for (size_t i = 0; i < n; i += 4093) payload[i] = static_cast<char>(i / 4093);
    return lsm::FrameManifestRecord(payload);
  };
  const std::string first = big('s', 10 << 20), later = big('e', 9 << 20);
  ASSERT_TRUE(store->AppendManifest(first).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 2)).ok());
  ASSERT_TRUE(store->AppendManifest(later).ok());
  const std::string want = first + Record(false, 2) + later;
  auto got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value() == want) << got.value().size() << " bytes, not " << want.size();
  ASSERT_TRUE(store->RollManifest(big('r', 12 << 20)).ok());
  got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got.value() == big('r', 12 << 20));
}

TEST_F(StocTableStoreTest, ManifestRepairsAfterAStocFails) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 2)).ok());
  const std::set<uint32_t> holders = Holders(StocFileType::kManifest, 1);
  ASSERT_EQ(holders.size(), 2u);
  const uint32_t victim = *holders.begin();
  StopStoc(victim);
  // The append cannot reach every replica: it fails, and the next one first rewrites the
  // acknowledged records into a new MANIFEST on live StoCs.
  EXPECT_FALSE(store->AppendManifest(Record(false, 3)).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 3)).ok());
  EXPECT_EQ(store->GetStats().manifest_repairs, 1u);
  EXPECT_EQ(store->manifest_number(), 2u);
  const std::string want = Record(true, 1) + Record(false, 2) + Record(false, 3);
  // One StoC down is fewer than the MANIFEST's replicas: recovery still finds it.
  auto got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), want);
  // With one replica, a down StoC might hold the only copy of a newer MANIFEST.
  StocTableStoreOptions single = o;
  single.manifest_replicas = 1;
  EXPECT_TRUE(NewStore(single)->ReadManifest().status().IsUnavailable());

  // The StoC comes back with the stale MANIFEST 1; the next recovery removes it.
  ASSERT_NO_FATAL_FAILURE(RestartStoc(victim));
  EXPECT_EQ(Holders(StocFileType::kManifest, 1).size(), 1u);
  got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), want);
  EXPECT_TRUE(Holders(StocFileType::kManifest, 1).empty());
  EXPECT_EQ(Holders(StocFileType::kManifest, 2).size(), 2u);
}

// Issue 20's pattern on StoCs: a MANIFEST is rewritten elsewhere while a StoC holding the
// old one is down; that StoC comes back with the stale copy, and then the StoC of the new
// one loses its disk. Without the LTC's MANIFEST pointer the stale copy looks current and
// the range would silently lose every edit since; with it, ReadManifest waits (Unavailable)
// and opens from the stale copy only when forced.
TEST_F(StocTableStoreTest, StaleManifestIsRefusedWhenTheNewOneIsLost) {
  StocTableStoreOptions o;
  o.manifest_replicas = 1;
  o.manifest_pointer_path = dir_ + "/ltc/manifests/r" + std::to_string(kRange) + ".pointer";
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 2)).ok());
  const std::set<uint32_t> old_holders = Holders(StocFileType::kManifest, 1);
  ASSERT_EQ(old_holders.size(), 1u);
  const uint32_t stale = *old_holders.begin();
  StopStoc(stale);
  EXPECT_FALSE(store->AppendManifest(Record(false, 3)).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 3)).ok());  // rewritten as MANIFEST 2
  const std::set<uint32_t> new_holders = Holders(StocFileType::kManifest, 2);
  ASSERT_EQ(new_holders.size(), 1u);
  const uint32_t lost = *new_holders.begin();
  store.reset();
  ASSERT_NO_FATAL_FAILURE(RestartStoc(stale));  // still holds MANIFEST 1
  // The StoC of MANIFEST 2 loses its disk.
  StopStoc(lost);
  std::filesystem::remove_all(dir_ + "/stoc" + std::to_string(lost));
  ASSERT_NO_FATAL_FAILURE(RestartStoc(lost));
  ASSERT_EQ(Holders(StocFileType::kManifest, 1).size(), 1u);

  auto refused = NewStore(o)->ReadManifest();
  ASSERT_TRUE(refused.status().IsUnavailable()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("completed MANIFEST 2"), std::string::npos)
      << refused.status().ToString();
  // What a store without the pointer does (the old behaviour): the stale edits, silently.
  StocTableStoreOptions blind = o;
  blind.manifest_pointer_path.clear();
  auto stale_read = NewStore(blind)->ReadManifest();
  ASSERT_TRUE(stale_read.ok());
  EXPECT_EQ(stale_read.value(), Record(true, 1) + Record(false, 2));
  // An operator who knows the new MANIFEST is gone for good forces the open; the next
  // MANIFEST takes a number above every one recorded.
  StocTableStoreOptions forced = o;
  forced.force_recovery = true;
  auto forced_store = NewStore(forced);
  auto opened = forced_store->ReadManifest();
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened.value(), Record(true, 1) + Record(false, 2));
  ASSERT_TRUE(forced_store->RollManifest(Record(true, 4)).ok());
  EXPECT_GT(forced_store->manifest_number(), 2u);
  auto after = NewStore(o)->ReadManifest();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after.value(), Record(true, 4));
}

// A range whose every MANIFEST copy is gone does not open as a new, empty range.
TEST_F(StocTableStoreTest, LostManifestIsNotANewRange) {
  StocTableStoreOptions o;
  o.manifest_replicas = 1;
  o.manifest_pointer_path = dir_ + "/ltc/manifests/r" + std::to_string(kRange) + ".pointer";
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  const std::set<uint32_t> holders = Holders(StocFileType::kManifest, 1);
  ASSERT_EQ(holders.size(), 1u);
  store.reset();
  const uint32_t lost = *holders.begin();
  StopStoc(lost);
  std::filesystem::remove_all(dir_ + "/stoc" + std::to_string(lost));
  ASSERT_NO_FATAL_FAILURE(RestartStoc(lost));
  EXPECT_TRUE(NewStore(o)->ReadManifest().status().IsUnavailable());
}

TEST_F(StocTableStoreTest, ManifestRecoveryPrefersTheLongestReplicaAndIgnoresEmptyRollOvers) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 2)).ok());
  const std::set<uint32_t> holders = Holders(StocFileType::kManifest, 1);
  ASSERT_EQ(holders.size(), 2u);
  store.reset();
  // An append that reached one replica only (its writer died before the other), and a
  // roll-over that created MANIFEST 9 but wrote nothing into it.
  const std::string extra = Record(false, 3);
  auto reg = transport_->RegisterMemory(const_cast<char*>(extra.data()), extra.size(),
                                        transport::kLocalOnly);
  ASSERT_TRUE(reg.ok());
  auto f =
      client_->Open(*holders.begin(), ManifestFileName(kRange, 1), FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->Append(f.value().get(), reg.value(), 0, extra.size()).ok());
  ASSERT_TRUE(client_->Close(f.value().get()).ok());
  f = client_->Open(4, ManifestFileName(kRange, 9), FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->Close(f.value().get()).ok());

  auto recovered = NewStore(o);
  auto got = recovered->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), Record(true, 1) + Record(false, 2) + extra);
  // The replicas differed: it was rewritten past the abandoned number, and both old
  // MANIFESTs are gone.
  EXPECT_EQ(recovered->manifest_number(), 10u);
  EXPECT_EQ(recovered->GetStats().manifest_repairs, 1u);
  EXPECT_EQ(CountFiles(StocFileType::kManifest), 2u);
  ASSERT_TRUE(recovered->AppendManifest(Record(false, 4)).ok());
  EXPECT_EQ(NewStore(o)->ReadManifest().value(),
            Record(true, 1) + Record(false, 2) + extra + Record(false, 4));
  ASSERT_TRUE(transport_->DeregisterMemory(reg.value()).ok());
}

// With validate_manifest (the LTC passes its VersionEdit decoder), a replica whose frames
// check out but whose records the validator rejects is not chosen, however long it is; the
// replica that passes is kept and repaired onto the others.
TEST_F(StocTableStoreTest, ManifestRecoveryPassesOverAReplicaTheValidatorRejects) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  o.validate_manifest = [](std::string_view contents) {
    lsm::ManifestFrames frames;
    NOVA_RETURN_NOT_OK(lsm::ParseManifestFrames(contents, &frames));
    for (std::string_view p : frames.payloads) {
      if (p.substr(0, 3) == "bad") return Status::Corruption("undecodable record");
    }
    return Status::OK();
  };
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  ASSERT_TRUE(store->AppendManifest(Record(false, 2)).ok());
  const std::set<uint32_t> holders = Holders(StocFileType::kManifest, 1);
  ASSERT_EQ(holders.size(), 2u);
  store.reset();
  // One replica gets a well-framed record the validator rejects: it is now the longest.
  const std::string bad = lsm::FrameManifestRecord("bad record");
  auto reg = transport_->RegisterMemory(const_cast<char*>(bad.data()), bad.size(),
                                        transport::kLocalOnly);
  ASSERT_TRUE(reg.ok());
  auto f = client_->Open(*holders.begin(), ManifestFileName(kRange, 1), FileKind::kDisk);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->Append(f.value().get(), reg.value(), 0, bad.size()).ok());
  ASSERT_TRUE(client_->Close(f.value().get()).ok());

  auto got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), Record(true, 1) + Record(false, 2));
  // Without the validator the longest replica, the one with the bad record, would win.
  o.validate_manifest = nullptr;
  EXPECT_EQ(NewStore(o)->ReadManifest().value(), Record(true, 1) + Record(false, 2))
      << "the repair must have replaced the rejected replica";
  ASSERT_TRUE(transport_->DeregisterMemory(reg.value()).ok());
}

// Regression: recovery with manifest_replicas = 2 and a stopped StoC holding one replica of
// the current MANIFEST must repair it onto reachable StoCs. It used to place the new
// MANIFEST without excluding the StoC it had just failed to list, and failed (Unavailable)
// whenever placement picked it. Many ranges, each read by a fresh store with its own
// placement seed, so a placement that may pick the stopped StoC is all but certain to
// occur.
TEST_F(StocTableStoreTest, ManifestRepairAvoidsAnUnreachableStoc) {
  const uint64_t seed =
      nova::test::TestSeed("StocTableStoreTest.ManifestRepairAvoidsAnUnreachableStoc");
  constexpr uint32_t kVictim = 1;
  constexpr uint32_t kFirstRange = 100;
  constexpr uint32_t kRanges = 16;
  const std::string want = Record(true, 1) + Record(false, 2);
  // Each range's MANIFEST 1 on the victim and one other StoC.
  for (uint32_t i = 0; i < kRanges; ++i) {
    StocTableStoreOptions o;
    o.range_id = kFirstRange + i;
    o.stocs = {kVictim, 2 + i % 3};
    o.manifest_replicas = 2;
    auto writer = NewStore(o);
    ASSERT_TRUE(writer->AppendManifest(Record(true, 1)).ok());
    ASSERT_TRUE(writer->AppendManifest(Record(false, 2)).ok());
    ASSERT_EQ(ManifestHolders(o.range_id, 1), (std::set<uint32_t>{kVictim, 2 + i % 3}));
  }
  StopStoc(kVictim);
  for (uint32_t i = 0; i < kRanges; ++i) {
    SCOPED_TRACE("range " + std::to_string(kFirstRange + i));
    StocTableStoreOptions o;
    o.range_id = kFirstRange + i;
    o.manifest_replicas = 2;
    o.placement = i % 2 == 0 ? lsm::PlacementPolicy::kPowerOfD : lsm::PlacementPolicy::kRandom;
    o.seed = seed + i + 1;
    auto store = NewStore(o);
    auto got = store->ReadManifest();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got.value(), want);
    EXPECT_EQ(store->GetStats().manifest_repairs, 1u);
    ASSERT_EQ(store->manifest_number(), 2u);
    const std::set<uint32_t> holders = ManifestHolders(o.range_id, 2);
    EXPECT_EQ(holders.size(), 2u);
    EXPECT_EQ(holders.count(kVictim), 0u);
    // Later MANIFESTs (an append, a roll-over) avoid the StoC too, and a new store
    // recovers every record.
    ASSERT_TRUE(store->AppendManifest(Record(false, 3)).ok());
    ASSERT_TRUE(store->RollManifest(Record(true, 4)).ok());
    ASSERT_TRUE(store->AppendManifest(Record(false, 5)).ok());
    EXPECT_EQ(ManifestHolders(o.range_id, 3).count(kVictim), 0u);
    got = NewStore(o)->ReadManifest();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got.value(), Record(true, 4) + Record(false, 5));
  }
  // Back up, the victim still holds the stale MANIFEST 1 of every range; recovery removes it.
  ASSERT_NO_FATAL_FAILURE(RestartStoc(kVictim));
  StocTableStoreOptions o;
  o.range_id = kFirstRange;
  o.manifest_replicas = 2;
  auto got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), Record(true, 4) + Record(false, 5));
  EXPECT_TRUE(ManifestHolders(kFirstRange, 1).empty());
}

// A StoC that dies after the store last listed it is not known to be down: a new MANIFEST
// placed on it fails there and is placed again on StoCs that did not fail.
TEST_F(StocTableStoreTest, NewManifestStepsAroundAStocThatDiedUnnoticed) {
  const uint64_t seed =
      nova::test::TestSeed("StocTableStoreTest.NewManifestStepsAroundAStocThatDiedUnnoticed");
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  o.placement = lsm::PlacementPolicy::kRandom;
  o.seed = seed + 1;
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  const std::set<uint32_t> holders = Holders(StocFileType::kManifest, 1);
  ASSERT_EQ(holders.size(), 2u);
  uint32_t victim = 1;
  while (holders.count(victim) != 0) ++victim;
  StopStoc(victim);
  // Random placement picks the victim for a roll-over half of the time.
  constexpr int kRolls = 8;
  for (int k = 0; k < kRolls; ++k) {
    Status s = store->RollManifest(Record(true, 10 + k));
    ASSERT_TRUE(s.ok()) << "roll-over " << k << ": " << s.ToString();
    EXPECT_EQ(Holders(StocFileType::kManifest, store->manifest_number()).size(), 2u);
  }
  EXPECT_EQ(store->GetStats().manifest_rolls, static_cast<uint64_t>(kRolls));
  auto got = NewStore(o)->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), Record(true, 10 + kRolls - 1));
}

// Garbage collection: ListTables finds this range's tables (not other ranges', not
// MANIFESTs or logs); DeleteTableFiles removes every file of one table and nothing else.
TEST_F(StocTableStoreTest, ListAndDeleteOrphanedTables) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.ListAndDeleteOrphanedTables"));
  StocTableStoreOptions o;
  o.fragment_replicas = 2;
  o.manifest_replicas = 2;
  auto store = NewStore(o);
  StocTableStoreOptions other_options = o;
  other_options.range_id = kRange + 1;
  auto other = NewStore(other_options);
  std::map<uint64_t, lsm::TableMeta> metas;
  const lsm::table_test::TableModel m = lsm::table_test::RandomTableModel(&rng, 1000, 200);
  for (uint64_t number : {11, 12, 13}) {
    metas[number] = WriteChecked(store.get(), number, m, 2, 2);
    ASSERT_FALSE(HasFailure());
  }
  // Another range's table 12, both MANIFESTs, and files of this range that are not tables.
  const lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, m, 2, bloom_.get());
  lsm::TableMeta other12;
  other12.number = 12;
  other12.layout = built.layout;
  ASSERT_TRUE(other->WriteTable(12, built, &other12).ok());
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  ASSERT_TRUE(other->AppendManifest(Record(true, 1)).ok());
  const std::vector<std::string> not_tables = {
      LogFileName(kRange, 12), TableFragmentFileName({kRange, 12, 0, 0}) + "-copy"};
  for (const std::string& name : not_tables) {
    auto f = client_->Open(2, name, FileKind::kDisk);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(client_->Close(f.value().get()).ok());
  }

  auto listed = store->ListTables();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed.value(), (std::vector<uint64_t>{11, 12, 13}));
  EXPECT_EQ(other->ListTables().value(), (std::vector<uint64_t>{12}));

  // Table 12 of this range: 3 fragments (2 data, meta), 2 replicas each.
  ASSERT_TRUE(store->DeleteTableFiles(12).ok());
  EXPECT_EQ(store->GetStats().table_files_collected, 6u);
  ASSERT_TRUE(store->DeleteTableFiles(12).ok()) << "nothing left to delete is fine";
  ASSERT_TRUE(store->DeleteTableFiles(999).ok());
  EXPECT_EQ(store->ListTables().value(), (std::vector<uint64_t>{11, 13}));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(other.get(), icmp_, other12, m));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, metas[11], m));
  for (const std::string& name : not_tables) EXPECT_EQ(Files()[2].count(name), 1u) << name;
  EXPECT_EQ(NewStore(o)->ReadManifest().value(), Record(true, 1));
  EXPECT_EQ(NewStore(other_options)->ReadManifest().value(), Record(true, 1));

  // A StoC down: ListTables still answers with what the others hold (every table has a
  // replica elsewhere); DeleteTableFiles removes what it reaches and reports the StoC.
  const uint32_t victim = metas[13].fragments[0][0].stoc_id;
  StopStoc(victim);
  listed = store->ListTables();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed.value(), (std::vector<uint64_t>{11, 13}));
  Status s = store->DeleteTableFiles(13);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("listing StoC " + std::to_string(victim)), std::string::npos)
      << s.ToString();
  for (const auto& [id, names] : Files()) {
    for (const auto& name : names) {
      const ParsedFileName p = ParseStocFileName(name);
      EXPECT_FALSE(p.type == StocFileType::kTableFragment && p.range_id == kRange &&
                   p.number == 13)
          << name << " at StoC " << id;
    }
  }
  // Back up, it still holds table 13's files there; a second pass removes them.
  ASSERT_NO_FATAL_FAILURE(RestartStoc(victim));
  EXPECT_EQ(store->ListTables().value(), (std::vector<uint64_t>{11, 13}));
  ASSERT_TRUE(store->DeleteTableFiles(13).ok());
  EXPECT_EQ(store->ListTables().value(), (std::vector<uint64_t>{11}));
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, metas[11], m));

  // No StoC answers: an error rather than an empty list.
  StocTableStoreOptions lonely;
  lonely.stocs = {victim};
  auto alone = NewStore(lonely);
  StopStoc(victim);
  EXPECT_FALSE(alone->ListTables().ok());
}

// A MANIFEST append that fails at one replica (the record may be on the other) is never
// returned by a later ReadManifest once a following append or roll-over succeeded
// (invariant 2); a store that restarts right after the failure may adopt it, but then
// keeps it (invariant 4).
TEST_F(StocTableStoreTest, FailedManifestAppendNeverReappears) {
  constexpr uint32_t kFirstRange = 200;
  constexpr uint64_t kFailed = 666;
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    const uint32_t range = kFirstRange + static_cast<uint32_t>(round);
    SCOPED_TRACE("round " + std::to_string(round));
    StocTableStoreOptions o;
    o.range_id = range;
    o.manifest_replicas = 2;
    auto store = NewStore(o);
    std::string acked = Record(true, 1) + Record(false, 2);
    ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
    ASSERT_TRUE(store->AppendManifest(Record(false, 2)).ok());
    // The append group of whichever replica's StoC drains first fails; the other holds
    // the record. The injected error may also land where the store recovers by itself (a
    // storage operation it retries elsewhere): then the append is acknowledged, and the
    // round tries again, a bounded number of times, until an append fails.
    uint64_t failed = 0;  // the sequence of the record whose append failed
    for (uint64_t attempt = 0; attempt < 5 && failed == 0; ++attempt) {
      const uint64_t seq = kFailed + attempt;
      ASSERT_TRUE(FaultPoints::Arm("stoc.storage=error:once").ok());
      if (store->AppendManifest(Record(false, seq)).ok()) {
        // Acknowledged: the fault hit an operation the store retried, or none yet (a StoC's
        // drain that passed the fault point before it was armed can take this append too).
        acked += Record(false, seq);
        EXPECT_LE(FaultPoints::FireCount("stoc.storage"), 1u);
      } else {
        failed = seq;
        EXPECT_EQ(FaultPoints::FireCount("stoc.storage"), 1u);
      }
      FaultPoints::DisarmAll();
    }
    ASSERT_NE(failed, 0u) << "no append failed in 5 tries";

    std::string want;
    switch (round % 3) {
      case 0:  // the same store appends again
        ASSERT_TRUE(store->AppendManifest(Record(false, 3)).ok());
        want = acked + Record(false, 3);
        break;
      case 1:  // the same store rolls over
        ASSERT_TRUE(store->RollManifest(Record(true, 4)).ok());
        want = Record(true, 4);
        break;
      case 2: {  // the LTC restarts: whatever it reads first, it keeps
        store.reset();
        auto restarted = NewStore(o);
        auto first = restarted->ReadManifest();
        ASSERT_TRUE(first.ok()) << first.status().ToString();
        ASSERT_TRUE(first.value() == acked || first.value() == acked + Record(false, failed))
            << "a record that was never appended appeared";
        ASSERT_TRUE(restarted->AppendManifest(Record(false, 3)).ok());
        EXPECT_EQ(NewStore(o)->ReadManifest().value(), first.value() + Record(false, 3));
        continue;
      }
    }
    for (int reader = 0; reader < 2; ++reader) {
      auto got = reader == 0 ? store->ReadManifest() : NewStore(o)->ReadManifest();
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(got.value(), want) << "reader " << reader;
      lsm::ManifestFrames parsed;
      ASSERT_TRUE(lsm::ParseManifestFrames(got.value(), &parsed).ok());
      for (const std::string_view p : parsed.payloads) {
        EXPECT_NE(p.substr(p.find(' ') + 1), std::to_string(failed));
      }
    }
  }
}

// ---- Owner fencing --------------------------------------------------------------------

constexpr uint64_t Band(uint64_t epoch) { return epoch << kManifestEpochShift; }

// Appends summed over the running StoCs: what reached them durably.
uint64_t TotalAppends(StocClient* client, const std::vector<uint32_t>& ids) {
  uint64_t n = 0;
  for (uint32_t id : ids) {
    auto stats = client->Stats(id);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (stats.ok()) n += stats->appends;
  }
  return n;
}

TEST_F(StocTableStoreTest, NewerOwnerFencesOffTheLiveOldOne) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.NewerOwnerFencesOffTheLiveOldOne"));
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  o.fragment_replicas = 2;
  o.owner_epoch = 1;
  auto old_owner = NewStore(o);
  ASSERT_TRUE(old_owner->ReadManifest().ok());
  const std::string want = Record(true, 1) + Record(false, 2);
  ASSERT_TRUE(old_owner->AppendManifest(Record(true, 1)).ok());
  ASSERT_TRUE(old_owner->AppendManifest(Record(false, 2)).ok());
  EXPECT_EQ(old_owner->manifest_number(), Band(1));
  const lsm::table_test::TableModel m = lsm::table_test::RandomTableModel(&rng, 300, 100);
  const lsm::TableMeta table = WriteChecked(old_owner.get(), 5, m, 2, 2);
  ASSERT_FALSE(HasFailure());

  // The new owner opens the range while the old one is live: it finds the old owner's
  // MANIFEST and moves it into its own numbers.
  o.owner_epoch = 2;
  auto new_owner = NewStore(o);
  auto got = new_owner->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), want);
  EXPECT_EQ(new_owner->manifest_number(), Band(2));
  EXPECT_FALSE(new_owner->fenced());

  // The old owner's next MANIFEST append is refused, and the store stays fenced.
  Status s = old_owner->AppendManifest(Record(false, 3));
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  EXPECT_TRUE(old_owner->fenced());
  const auto files = Files();
  const uint64_t appends = TotalAppends(client_.get(), {1, 2, 3, 4});
  EXPECT_TRUE(old_owner->AppendManifest(Record(false, 4)).IsFenced());
  EXPECT_TRUE(old_owner->RollManifest(Record(true, 5)).IsFenced());
  EXPECT_TRUE(old_owner->ReadManifest().status().IsFenced());
  lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, m, 2, bloom_.get());
  lsm::TableMeta meta;
  meta.number = 6;
  meta.layout = built.layout;
  EXPECT_TRUE(old_owner->WriteTable(6, built, &meta).IsFenced());
  EXPECT_TRUE(old_owner->DeleteTable(table).IsFenced());
  EXPECT_TRUE(old_owner->DeleteTableFiles(5).IsFenced());
  // Nothing of it reached a StoC: the same files, no appends.
  EXPECT_EQ(Files(), files);
  EXPECT_EQ(TotalAppends(client_.get(), {1, 2, 3, 4}), appends);
  // Reads go on: the table is the new owner's too now.
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(old_owner.get(), icmp_, table, m));

  // The new owner goes on, and its MANIFEST is the one found afterwards.
  ASSERT_TRUE(new_owner->AppendManifest(Record(false, 7)).ok());
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(new_owner.get(), icmp_, table, m));
  auto restarted = NewStore(o);
  got = restarted->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), want + Record(false, 7));
  EXPECT_EQ(restarted->manifest_number(), Band(2));
}

TEST_F(StocTableStoreTest, OldOwnerMidTableWriteIsFencedAndCleansNothingUp) {
  std::mt19937_64 rng(
      nova::test::TestSeed("StocTableStoreTest.OldOwnerMidTableWriteIsFencedAndCleansNothingUp"));
  StocTableStoreOptions o;
  o.owner_epoch = 1;
  auto old_owner = NewStore(o);
  o.owner_epoch = 2;
  auto new_owner = NewStore(o);
  // The first table write of the old owner after the fence is refused at the open.
  const lsm::table_test::TableModel m = lsm::table_test::RandomTableModel(&rng, 300, 100);
  lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, m, 2, bloom_.get());
  lsm::TableMeta meta;
  meta.number = 9;
  meta.layout = built.layout;
  Status s = old_owner->WriteTable(9, built, &meta);
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  EXPECT_TRUE(old_owner->fenced());
  EXPECT_EQ(CountFiles(StocFileType::kTableFragment), 0u);
  // The new owner writes the same number unhindered.
  WriteChecked(new_owner.get(), 9, m, 2, 1);
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(old_owner->DeleteTableFiles(9).IsFenced());
  EXPECT_EQ(CountFiles(StocFileType::kTableFragment), 3u);
}

TEST_F(StocTableStoreTest, StaleOwnerLearnsItIsStaleWhenItOpens) {
  StocTableStoreOptions o;
  o.owner_epoch = 3;
  auto current = NewStore(o);
  ASSERT_TRUE(current->AppendManifest(Record(true, 1)).ok());
  o.owner_epoch = 2;
  o.range_id = kRange;
  o.stocs = {1, 2, 3, 4};
  StocTableStore stale(client_.get(), o);
  Status s = stale.Init();
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  EXPECT_TRUE(stale.fenced());
  EXPECT_TRUE(stale.ReadManifest().status().IsFenced());
  // A legacy store (epoch 0) is not fenced by anything and fences nothing, but the StoCs
  // refuse its writes to a fenced range.
  o.owner_epoch = 0;
  auto legacy = NewStore(o);
  EXPECT_TRUE(legacy->AppendManifest(Record(false, 2)).IsFenced());
}

TEST_F(StocTableStoreTest, FenceNeedsAllButManifestReplicasMinusOneStocs) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  o.owner_epoch = 1;
  o.range_id = kRange;
  o.stocs = {1, 2, 3, 4};
  StopStoc(3);
  StopStoc(4);
  {
    StocTableStore store(client_.get(), o);
    Status s = store.Init();
    EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
    EXPECT_NE(s.message().find("StoCs 3, 4 did not confirm"), std::string::npos) << s.ToString();
    EXPECT_FALSE(store.fenced());
  }
  // One StoC short is enough: every MANIFEST has a replica among the other three.
  ASSERT_NO_FATAL_FAILURE(RestartStoc(3));
  auto store = NewStore(o);
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  EXPECT_EQ(ManifestHolders(kRange, Band(1)).count(4), 0u);
}

// An old owner's MANIFEST left at a StoC that missed the new owner's fence (numbered above
// the one the new owner found) does not win a later discovery: the new owner's numbers are
// higher (F2).
TEST_F(StocTableStoreTest, StaleManifestAtAStocThatMissedTheFenceLoses) {
  StocTableStoreOptions o;
  o.manifest_replicas = 2;
  o.owner_epoch = 1;
  auto old_owner = NewStore(o);
  ASSERT_TRUE(old_owner->AppendManifest(Record(true, 1)).ok());
  StopStoc(4);
  o.owner_epoch = 2;
  auto new_owner = NewStore(o);
  auto got = new_owner->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), Record(true, 1));
  ASSERT_TRUE(new_owner->AppendManifest(Record(false, 2)).ok());
  EXPECT_EQ(ManifestHolders(kRange, Band(2)).count(4), 0u);
  ASSERT_NO_FATAL_FAILURE(RestartStoc(4));

  // StoC 4 knows only epoch 1: the old owner's roll-over can complete a replica there.
  const std::string stale = Record(true, 99);
  auto reg = transport_->RegisterMemory(const_cast<char*>(stale.data()), stale.size(),
                                        transport::kLocalOnly);
  ASSERT_TRUE(reg.ok());
  OpenOptions at_one;
  at_one.owner_epoch = 1;
  auto f = client_->Open(4, ManifestFileName(kRange, Band(1) + 7), FileKind::kDisk, at_one);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(client_->Append(f.value().get(), reg.value(), 0, stale.size()).ok());
  ASSERT_TRUE(client_->Close(f.value().get()).ok());
  ASSERT_TRUE(transport_->DeregisterMemory(reg.value()).ok());

  // The new owner, restarted, fences StoC 4 too, keeps its own MANIFEST and removes the
  // stale one.
  auto restarted = NewStore(o);
  got = restarted->ReadManifest();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got.value(), Record(true, 1) + Record(false, 2));
  EXPECT_EQ(restarted->manifest_number(), new_owner->manifest_number());
  EXPECT_TRUE(ManifestHolders(kRange, Band(1) + 7).empty());
  // And StoC 4 now refuses the old owner.
  EXPECT_TRUE(client_->Open(4, ManifestFileName(kRange, Band(1) + 8), FileKind::kDisk, at_one)
                  .status()
                  .IsFenced());
}

// A MANIFEST numbered in a newer owner's band proves a newer owner even where no StoC has
// answered Fenced yet (here: the fence was never sent; the store skips it).
TEST_F(StocTableStoreTest, DiscoveryOfANewerOwnersManifestIsFenced) {
  StocTableStoreOptions o;
  o.owner_epoch = 5;
  ASSERT_TRUE(NewStore(o)->AppendManifest(Record(true, 1)).ok());
  o.owner_epoch = 4;
  o.fence_on_init = false;
  auto stale = NewStore(o);
  auto got = stale->ReadManifest();
  EXPECT_TRUE(got.status().IsFenced()) << got.status().ToString();
  EXPECT_TRUE(stale->fenced());
}

// ---- Availability: parity, hybrid, relocation and sweeping ------------------------------

namespace {

// The StoCs holding any copy of `meta` (fragments, filter, parity).
std::set<uint32_t> CopyStocs(const lsm::TableMeta& meta) {
  std::set<uint32_t> out;
  for (const auto& replicas : meta.fragments) {
    for (const auto& l : replicas) out.insert(l.stoc_id);
  }
  for (const auto& l : meta.filter) out.insert(l.stoc_id);
  for (const auto& l : meta.parity) out.insert(l.stoc_id);
  return out;
}

// The StoCs of the stripe's members: non-empty data fragments (and the meta fragment when
// parity covers it) and parity fragments. EXPECTs they are distinct.
void ExpectStripeOnDistinctStocs(const lsm::TableMeta& meta) {
  std::vector<uint32_t> at;
  const uint32_t rho = meta.layout.num_data_fragments();
  for (uint32_t i = 0; i < rho + (meta.parity_covers_meta ? 1 : 0); ++i) {
    if (meta.layout.FragmentSize(i) == 0) continue;
    ASSERT_EQ(meta.fragments[i].size(), 1u) << "a stripe column has one copy";
    at.push_back(meta.fragments[i][0].stoc_id);
  }
  for (const auto& l : meta.parity) at.push_back(l.stoc_id);
  EXPECT_EQ(std::set<uint32_t>(at.begin(), at.end()).size(), at.size())
      << "two members of a stripe share a StoC";
}

}  // namespace

class StocTableStoreAvailabilityTest
    : public StocTableStoreTest,
      public ::testing::WithParamInterface<std::tuple<lsm::TableAvailability, int, uint32_t>> {
 protected:
  lsm::TableAvailability mode() const { return std::get<0>(GetParam()); }
  int m() const { return std::get<1>(GetParam()); }
  uint32_t rho() const { return std::get<2>(GetParam()); }
  StocTableStoreOptions Options() const {
    StocTableStoreOptions o;
    o.availability = mode();
    o.parity_fragments = m();
    o.fragment_replicas = m() + 1;  // replicas mode: as many losses survived as with parity
    return o;
  }
  lsm::TableMeta Write(StocTableStore* store, uint64_t number,
                       const lsm::table_test::TableModel& model) {
    lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, model, rho(), bloom_.get());
    lsm::TableMeta meta;
    meta.number = number;
    meta.layout = built.layout;
    Status s = store->WriteTable(number, built, &meta);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return meta;
  }
};

// Every set of m StoCs may be lost at once: every byte of every table (data, index,
// filter) still reads back, rebuilt from the stripe where needed.
TEST_P(StocTableStoreAvailabilityTest, EveryTableSurvivesTheLossOfAnyMStocs) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreAvailabilityTest.AnyMStocs"));
  auto store = NewStore(Options());
  std::vector<lsm::table_test::TableModel> models;
  std::vector<lsm::TableMeta> metas;
  for (uint64_t t = 0; t < 3; ++t) {
    // Large enough for several blocks per fragment, uneven fragment sizes.
    models.push_back(lsm::table_test::RandomTableModel(&rng, 500 + 700 * t, 200));
    metas.push_back(Write(store.get(), 10 + t, models.back()));
    ASSERT_FALSE(HasFailure());
    if (mode() != lsm::TableAvailability::kReplicas) {
      EXPECT_EQ(metas.back().parity.size(), static_cast<size_t>(m()));
      EXPECT_EQ(metas.back().parity_covers_meta, mode() == lsm::TableAvailability::kParity);
      ASSERT_NO_FATAL_FAILURE(ExpectStripeOnDistinctStocs(metas.back()));
    }
    if (mode() == lsm::TableAvailability::kHybrid) {
      EXPECT_EQ(metas.back().fragments[rho()].size(), static_cast<size_t>(m() + 1));
      EXPECT_EQ(metas.back().filter.size(), static_cast<size_t>(m() + 1));
    }
  }
  // Every combination of m of the 4 StoCs.
  std::vector<std::vector<uint32_t>> losses;
  for (uint32_t a = 1; a <= kNumStocs; ++a) {
    if (m() == 1) {
      losses.push_back({a});
      continue;
    }
    for (uint32_t b = a + 1; b <= kNumStocs; ++b) losses.push_back({a, b});
  }
  for (const auto& lost : losses) {
    SCOPED_TRACE("StoCs lost: " + std::to_string(lost.front()) + " " +
                 std::to_string(lost.back()));
    for (uint32_t id : lost) StopStoc(id);
    // A new store as well: nothing it learned from earlier reads (suspects) helps it.
    for (size_t t = 0; t < metas.size(); ++t) {
      ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, metas[t], models[t]));
      ASSERT_NO_FATAL_FAILURE(
          lsm::table_test::VerifyFilter(store.get(), bloom_.get(), metas[t], models[t]));
    }
    for (uint32_t id : lost) ASSERT_NO_FATAL_FAILURE(RestartStoc(id));
  }
  if (mode() != lsm::TableAvailability::kReplicas) {
    EXPECT_GT(store->GetStats().degraded_reads, 0u);
    EXPECT_GT(store->GetStats().parity_files_written, 0u);
  }
  // Deleting removes the parity fragments too.
  for (const auto& meta : metas) EXPECT_TRUE(store->DeleteTable(meta).ok());
  EXPECT_EQ(CountFiles(StocFileType::kTableFragment), 0u);
}

// A lost StoC's copies are rebuilt elsewhere (from replicas or the stripe); the table then
// survives the loss of m more StoCs; the StoC, back, is swept of the stale copies.
TEST_P(StocTableStoreAvailabilityTest, RelocationRepairsAndTheSweepCleansUpTheReturnedStoc) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreAvailabilityTest.Relocation"));
  auto store = NewStore(Options());
  const auto model = lsm::table_test::RandomTableModel(&rng, 1500, 200);
  const lsm::TableMeta meta = Write(store.get(), 21, model);
  ASSERT_FALSE(HasFailure());
  // The StoC holding the most copies dies.
  std::map<uint32_t, int> count;
  for (const auto& replicas : meta.fragments) {
    for (const auto& l : replicas) count[l.stoc_id]++;
  }
  for (const auto& l : meta.parity) count[l.stoc_id]++;
  uint32_t victim = count.begin()->first;
  for (const auto& [id, n] : count) {
    if (n > count[victim]) victim = id;
  }
  StopStoc(victim);
  std::vector<uint32_t> rest;
  for (uint32_t id = 1; id <= kNumStocs; ++id) {
    if (id != victim) rest.push_back(id);
  }
  store->SetStocs(rest, {});
  const auto gone = [victim](uint32_t id) { return id == victim; };
  uint64_t bytes = 0;
  const size_t files_before = CountFiles(StocFileType::kTableFragment);
  auto moved = store->RelocateTable(meta, gone, &bytes);
  size_t stripe = meta.parity.size();
  for (uint32_t i = 0; i < rho() + (meta.parity_covers_meta ? 1 : 0); ++i) {
    stripe += meta.layout.FragmentSize(i) != 0 ? 1 : 0;
  }
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(CopyStocs(moved.value()).count(victim), 0u);
  EXPECT_GT(CountFiles(StocFileType::kTableFragment), files_before);
  const bool wide = mode() != lsm::TableAvailability::kReplicas && stripe == kNumStocs;
  if (wide) {
    // A stripe as wide as the cluster: what is left holds every other member, so the
    // rebuilt one shares a StoC with one of them. Readable, but not safe from another loss.
    ASSERT_NO_FATAL_FAILURE(
        lsm::table_test::VerifyTable(store.get(), icmp_, moved.value(), model));
    ASSERT_NO_FATAL_FAILURE(RestartStoc(victim));
    return;
  }
  if (mode() != lsm::TableAvailability::kReplicas) {
    ASSERT_NO_FATAL_FAILURE(ExpectStripeOnDistinctStocs(moved.value()));
  }
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, moved.value(), model));
  ASSERT_NO_FATAL_FAILURE(
      lsm::table_test::VerifyFilter(store.get(), bloom_.get(), moved.value(), model));
  // The old copies' StoC is down: deleting them fails there, which is fine.
  store->DeleteCopiesNotIn(meta, moved.value()).IgnoreError();
  // m more StoCs lost (m = 1: any one of the rest): still readable.
  for (uint32_t other : rest) {
    StopStoc(other);
    ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, moved.value(), model))
        << "lost StoC " << other << " after the repair";
    RestartStoc(other);
  }
  // The victim returns with its stale copies; a sweep deletes them and nothing else.
  ASSERT_NO_FATAL_FAILURE(RestartStoc(victim));
  store->SetStocs({1, 2, 3, 4}, {});
  EXPECT_FALSE(Files()[victim].empty());
  auto swept = store->SweepTableFiles({{21, moved.value()}}, 21);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(swept.value(), static_cast<uint64_t>(count[victim]));
  auto after_sweep = Files();
  for (const auto& name : after_sweep[victim]) {
    EXPECT_NE(ParseStocFileName(name).type, StocFileType::kTableFragment) << name;
  }
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, moved.value(), model));
}

INSTANTIATE_TEST_SUITE_P(
    Modes, StocTableStoreAvailabilityTest,
    ::testing::Values(std::make_tuple(lsm::TableAvailability::kReplicas, 1, 2u),
                      std::make_tuple(lsm::TableAvailability::kParity, 1, 1u),
                      std::make_tuple(lsm::TableAvailability::kParity, 1, 2u),
                      std::make_tuple(lsm::TableAvailability::kParity, 2, 1u),
                      std::make_tuple(lsm::TableAvailability::kHybrid, 1, 2u),
                      std::make_tuple(lsm::TableAvailability::kHybrid, 2, 1u)),
    [](const auto& info) {
      return std::string(lsm::TableAvailabilityName(std::get<0>(info.param))) + "_m" +
             std::to_string(std::get<1>(info.param)) + "_rho" +
             std::to_string(std::get<2>(info.param));
    });

// A drained StoC: its copies move while it still serves them, it gets no new table, and
// deleting the old copies leaves it without a table file. The MANIFEST moves off it too.
TEST_F(StocTableStoreTest, DrainMovesEveryCopyAndTheManifestOffAStocThatStillServes) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.Drain"));
  StocTableStoreOptions o;
  o.availability = lsm::TableAvailability::kHybrid;
  o.manifest_replicas = 2;
  auto store = NewStore(o);
  std::vector<lsm::table_test::TableModel> models;
  std::vector<lsm::TableMeta> metas;
  for (uint64_t t = 0; t < 4; ++t) {
    models.push_back(lsm::table_test::RandomTableModel(&rng, 800, 200));
    lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, models.back(), 2, bloom_.get());
    lsm::TableMeta meta;
    meta.number = 30 + t;
    meta.layout = built.layout;
    ASSERT_TRUE(store->WriteTable(meta.number, built, &meta).ok());
    metas.push_back(meta);
  }
  ASSERT_TRUE(store->AppendManifest(Record(true, 1)).ok());
  const uint32_t drained = *ManifestHolders(kRange, store->manifest_number()).begin();
  store->SetStocs({1, 2, 3, 4}, {drained});
  const auto must_move = [drained](uint32_t id) { return id == drained; };
  for (auto& meta : metas) {
    auto moved = store->RelocateTable(meta, must_move, nullptr);
    ASSERT_TRUE(moved.ok()) << moved.status().ToString();
    EXPECT_EQ(CopyStocs(moved.value()).count(drained), 0u);
    ASSERT_TRUE(store->DeleteCopiesNotIn(meta, moved.value()).ok());
    meta = moved.value();
  }
  ASSERT_TRUE(store->EvacuateManifest(must_move).ok());
  EXPECT_EQ(ManifestHolders(kRange, store->manifest_number()).count(drained), 0u);
  // New tables avoid it.
  for (uint64_t t = 0; t < 4; ++t) {
    const auto model = lsm::table_test::RandomTableModel(&rng, 300, 100);
    lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, model, 2, bloom_.get());
    lsm::TableMeta meta;
    meta.number = 40 + t;
    meta.layout = built.layout;
    ASSERT_TRUE(store->WriteTable(meta.number, built, &meta).ok());
    EXPECT_EQ(CopyStocs(meta).count(drained), 0u);
    ASSERT_TRUE(store->DeleteTable(meta).ok());
  }
  auto after_drain = Files();
  for (const auto& name : after_drain[drained]) {
    EXPECT_NE(ParseStocFileName(name).type, StocFileType::kTableFragment) << name;
    EXPECT_NE(ParseStocFileName(name).type, StocFileType::kManifest) << name;
  }
  for (size_t t = 0; t < metas.size(); ++t) {
    ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, metas[t], models[t]));
  }
  // A new store (a restart) reads the same MANIFEST.
  auto again = NewStore(o);
  auto contents = again->ReadManifest();
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  EXPECT_EQ(contents.value(), Record(true, 1));
}

// Relocated off StoC a, then back onto it under the same file name: releasing the oldest
// metadata must not delete the newest one's copy there (DeleteCopiesNotInAny keeps what any
// later metadata of the table holds).
TEST_F(StocTableStoreTest, CopyMovedBackUnderTheSameNameIsNotDeleted) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.MovedBack"));
  StocTableStoreOptions o;
  o.availability = lsm::TableAvailability::kNone;
  auto store = NewStore(o);
  const auto model = lsm::table_test::RandomTableModel(&rng, 300, 100);
  lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, model, 1, bloom_.get());
  lsm::TableMeta a;
  a.number = 50;
  a.layout = built.layout;
  ASSERT_TRUE(store->WriteTable(a.number, built, &a).ok());
  const uint32_t x = a.fragments[0][0].stoc_id;
  std::vector<uint32_t> others;
  for (uint32_t id = 1; id <= kNumStocs; ++id) {
    if (id != x) others.push_back(id);
  }
  // A -> B: fragment 0 leaves x.
  auto b = store->RelocateTable(a, [x](uint32_t id) { return id == x; }, nullptr);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const uint32_t y = b->fragments[0][0].stoc_id;
  ASSERT_NE(y, x);
  // B -> C: fragment 0 leaves y, and x is the only StoC that takes data.
  std::vector<uint32_t> not_x;
  for (uint32_t id : others) not_x.push_back(id);
  store->SetStocs({1, 2, 3, 4}, not_x);
  auto c = store->RelocateTable(b.value(), [y](uint32_t id) { return id == y; }, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->fragments[0][0].stoc_id, x);
  // A released while B and C live: nothing of A that B or C holds goes.
  ASSERT_TRUE(store->DeleteCopiesNotInAny(a, {b.value(), c.value()}).ok());
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, c.value(), model));
  // B released while C lives: its copy at y goes, C's at x stays.
  ASSERT_TRUE(store->DeleteCopiesNotInAny(b.value(), {c.value()}).ok());
  auto files = Files();
  EXPECT_EQ(files[y].count(TableFragmentFileName({kRange, 50, 0, 0})), 0u);
  EXPECT_EQ(files[x].count(TableFragmentFileName({kRange, 50, 0, 0})), 1u);
  ASSERT_NO_FATAL_FAILURE(lsm::table_test::VerifyTable(store.get(), icmp_, c.value(), model));
}

// The sweep deletes unreferenced tables only below the bound, and never a live table's
// copies where its metadata places them.
TEST_F(StocTableStoreTest, SweepDeletesOnlyGarbage) {
  std::mt19937_64 rng(nova::test::TestSeed("StocTableStoreTest.Sweep"));
  StocTableStoreOptions o;
  o.availability = lsm::TableAvailability::kParity;
  auto store = NewStore(o);
  std::map<uint64_t, lsm::TableMeta> all;
  for (uint64_t t = 1; t <= 6; ++t) {
    const auto model = lsm::table_test::RandomTableModel(&rng, 200, 100);
    lsm::BuiltTable built = lsm::table_test::BuildTable(icmp_, model, 1, bloom_.get());
    lsm::TableMeta meta;
    meta.number = t;
    meta.layout = built.layout;
    ASSERT_TRUE(store->WriteTable(t, built, &meta).ok());
    all[t] = meta;
  }
  // Live: 1, 2, 5. Garbage below 4: 3. In flight (>= 4): 4, 6.
  std::map<uint64_t, lsm::TableMeta> live{{1, all[1]}, {2, all[2]}, {5, all[5]}};
  auto swept = store->SweepTableFiles(live, 4);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(swept.value(), 3u);  // table 3: data, meta, parity
  std::set<uint64_t> left;
  for (const auto& [id, names] : Files()) {
    for (const auto& name : names) {
      const ParsedFileName p = ParseStocFileName(name);
      if (p.type == StocFileType::kTableFragment) left.insert(p.number);
    }
  }
  EXPECT_EQ(left, (std::set<uint64_t>{1, 2, 4, 5, 6}));
  auto again = store->SweepTableFiles(live, 4);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value(), 0u);
}

}  // namespace
}  // namespace nova::stoc
