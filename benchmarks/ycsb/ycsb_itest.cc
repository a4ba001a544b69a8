// End to end: build/bin/nova_ycsb -load then -run against the embedded bindings in a
// scratch directory and against a local cluster (3 nova_stoc + 2 nova_ltc processes),
// checking YCSB's output lines, data-integrity verification, the time series and
// benchmarks/plot_timeseries. Counts are small so the whole file runs in seconds.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

namespace nova::ycsb {
namespace {

struct Proc {
  int exit_code = -1;
  std::string out;  // stdout: the report
  std::string err;  // stderr: command line, status lines, errors
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a shell command line, capturing stdout and stderr.
Proc Shell(const std::string& command, const std::string& scratch) {
  const std::string err_path = scratch + "/stderr.txt";
  Proc r;
  FILE* p = popen((command + " 2>" + err_path).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadFile(err_path);
  return r;
}

std::string Ycsb() { return test::BinDir() + "/nova_ycsb"; }
std::string Workload(const std::string& name) {
  return std::string(NOVA_SOURCE_DIR) + "/benchmarks/ycsb/workloads/" + name;
}

// The value of "[SECTION], NAME, value", or -1 if the line is absent.
double Figure(const std::string& out, const std::string& section, const std::string& name) {
  const std::string prefix = "[" + section + "], " + name + ", ";
  const size_t at = out.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(at + prefix.size()));
}

// Load then run workloada with dataintegrity against binding `db`, configured by
// `binding_props` ("-p name=value ..."; empty: `db`.dir in a scratch directory).
void LoadAndRunWorkloadA(const std::string& db, std::string binding_props = "") {
  const std::string dir = test::TestTempDir("ycsb_itest_" + db);
  if (binding_props.empty()) binding_props = " -p " + db + ".dir=" + dir + "/db";
  const std::string common = " -db " + db + " -P " + Workload("workloada") + binding_props +
                             " -p recordcount=2000 -p dataintegrity=true" +
                             " -p fieldcount=4 -p fieldlength=64 -threads 2";
  Proc load = Shell(Ycsb() + " -load" + common, dir);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_EQ(Figure(load.out, "INSERT", "Return=OK"), 2000) << load.out;
  EXPECT_GT(Figure(load.out, "OVERALL", "RunTime(ms)"), -1) << load.out;

  const std::string ts = dir + "/ts.csv";
  Proc run = Shell(Ycsb() + " -run -s" + common + " -p operationcount=6000 -p timeseries=" + ts,
                  dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // YCSB's report.
  EXPECT_EQ(run.out.rfind("[OVERALL], RunTime(ms), ", 0), 0u) << run.out;
  EXPECT_GT(Figure(run.out, "OVERALL", "Throughput(ops/sec)"), 0) << run.out;
  const double reads = Figure(run.out, "READ", "Return=OK");
  const double updates = Figure(run.out, "UPDATE", "Return=OK");
  EXPECT_GT(reads, 0) << run.out;
  EXPECT_GT(updates, 0) << run.out;
  EXPECT_EQ(reads + updates, 6000) << run.out;
  for (const char* line : {"[READ], 99thPercentileLatency(us), ",
                           "[UPDATE], 95thPercentileLatency(us), ",
                           "[READ], AverageLatency(us), "}) {
    EXPECT_NE(run.out.find(line), std::string::npos) << line;
  }
  // Every read verified, none wrong.
  EXPECT_EQ(Figure(run.out, "VERIFY", "Return=OK"), reads) << run.out;
  EXPECT_EQ(run.out.find("UNEXPECTED_STATE"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("Return=ERROR"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("Return=NOT_FOUND"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("-FAILED]"), std::string::npos) << run.out;
  // A final status line (-s), YCSB style.
  EXPECT_TRUE(std::regex_search(run.err, std::regex(R"(\d+ sec: 6000 operations; )"))) << run.err;

  // The time series: header and at least one row, whose ops add up to the run.
  std::ifstream in(ts);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line.rfind("second,ops,failed_ops,read_ops", 0), 0u) << line;
  long total = 0;
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    total += std::stol(line.substr(line.find(',') + 1));
  }
  EXPECT_GE(rows, 1);
  EXPECT_EQ(total, 6000);

  // plot_timeseries turns it into a PNG.
  const std::string png = dir + "/ts.png";
  Proc plot = Shell(std::string(NOVA_SOURCE_DIR) + "/benchmarks/plot_timeseries " + ts + " " +
                       png,
                   dir);
  if (plot.exit_code == 2) GTEST_SKIP() << "plotting skipped: " << plot.err;
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  const std::string bytes = ReadFile(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
}

class YcsbItest : public ::testing::TestWithParam<std::string> {};

TEST_P(YcsbItest, LoadRunWorkloadAWithDataIntegrity) {
  if (GetParam() == "rocksdb" && !NOVA_YCSB_ROCKSDB_BUILT) {
    GTEST_SKIP() << "nova_ycsb built without librocksdb";
  }
  LoadAndRunWorkloadA(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Bindings, YcsbItest, ::testing::Values("leveldb", "rocksdb"));

TEST(YcsbItestMisc, VerificationCatchesWrongValues) {
  // Loaded with random values, verified as if derived from the keys: every read must be
  // reported UNEXPECTED_STATE, proving the verifier looks at the data.
  const std::string dir = test::TestTempDir("ycsb_itest_wrong_values");
  const std::string common = " -db leveldb -P " + Workload("workloadc") + " -p leveldb.dir=" +
                             dir + "/db -p recordcount=300 -p operationcount=500";
  ASSERT_EQ(Shell(Ycsb() + " -load" + common, dir).exit_code, 0);
  Proc run = Shell(Ycsb() + " -run" + common + " -p dataintegrity=true", dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Figure(run.out, "VERIFY", "Return=UNEXPECTED_STATE"), 500) << run.out;
}

TEST(YcsbItestMisc, EveryWorkloadFileRuns) {
  for (const char* wl : {"workloada", "workloadb", "workloadc", "workloadd", "workloade",
                         "workloadf", "rw50", "sw50", "w100"}) {
    SCOPED_TRACE(wl);
    const std::string dir = test::TestTempDir(std::string("ycsb_itest_wl_") + wl);
    const std::string common = " -db leveldb -P " + Workload(wl) + " -p leveldb.dir=" + dir +
                               "/db -p recordcount=500 -p operationcount=500 -p fieldlength=32" +
                               " -p dataintegrity=true -p maxscanlength=10";
    Proc load = Shell(Ycsb() + " -load" + common, dir);
    ASSERT_EQ(load.exit_code, 0) << load.err;
    EXPECT_EQ(Figure(load.out, "INSERT", "Return=OK"), 500) << load.out;
    Proc run = Shell(Ycsb() + " -run -threads 2" + common, dir);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out.find("UNEXPECTED_STATE"), std::string::npos) << run.out;
    EXPECT_EQ(run.out.find("Return=ERROR"), std::string::npos) << run.out;
    EXPECT_EQ(run.out.find("Return=NOT_FOUND"), std::string::npos) << run.out;
    EXPECT_GT(Figure(run.out, "OVERALL", "Throughput(ops/sec)"), 0) << run.out;
  }
}

TEST(YcsbItestMisc, ClearErrors) {
  const std::string dir = test::TestTempDir("ycsb_itest_errors");
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"-run -db nova -p recordcount=10 -p operationcount=10", "nova.ltc"},
      {"-run -db nova -p nova.zk=localhost:2181 -p recordcount=10 -p operationcount=10",
       "nova.cluster"},
      {"-run -db nova -p nova.zk=127.0.0.1:1 -p nova.cluster=c -p nova.timeout_ms=1500 "
       "-p recordcount=10 -p operationcount=10",
       "ZooKeeper"},
      {"-run -db nova -p nova.ltc=localhost -p recordcount=10 -p operationcount=10",
       "not host:port"},
      {"-run -db nova -p nova.ltc=127.0.0.1:1 -p nova.timeout_ms=500 -p recordcount=10 "
       "-p operationcount=10",
       "127.0.0.1:1"},
      {"-run -db leveldb -p recordcount=10 -p operationcount=10", "leveldb.dir"},
      {"-run -db nosuch -p recordcount=10 -p operationcount=10", "unknown binding"},
      {"-run -db leveldb -p recordcount=10 -p requestdistribution=gauss", "requestdistribution"},
      {"-db leveldb -p recordcount=10", "-load and -run"},
  };
  for (const Case& c : cases) {
    Proc r = Shell(Ycsb() + " " + c.args, dir);
    EXPECT_EQ(r.exit_code, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << ": " << r.err;
  }
  Proc help = Shell(Ycsb() + " --help", dir);
  EXPECT_EQ(help.exit_code, 0);
  for (const char* word : {"requestdistribution", "timeseries", "leveldb.dir", "nova.zk",
                           "-target", "maxexecutiontime", "dataintegrity"}) {
    EXPECT_NE(help.out.find(word), std::string::npos) << word;
  }
}

TEST(YcsbItestMisc, TargetThrottlesAndMaxExecutionTimeBounds) {
  const std::string dir = test::TestTempDir("ycsb_itest_target");
  const std::string common = " -db leveldb -P " + Workload("workloada") + " -p leveldb.dir=" +
                             dir + "/db -p recordcount=200";
  ASSERT_EQ(Shell(Ycsb() + " -load" + common, dir).exit_code, 0);
  // 400 ops at 200 ops/s over 2 threads: about 2 s, not the milliseconds it would take.
  Proc run = Shell(Ycsb() + " -run -threads 2 -target 200 -p operationcount=400" + common, dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const double ms = Figure(run.out, "OVERALL", "RunTime(ms)");
  EXPECT_GT(ms, 1500) << run.out;
  EXPECT_LT(ms, 6000) << run.out;
  // maxexecutiontime stops an otherwise 10^9-operation run after about a second.
  Proc bounded = Shell(Ycsb() + " -run -p operationcount=1000000000 -p maxexecutiontime=1" + common,
                      dir);
  ASSERT_EQ(bounded.exit_code, 0) << bounded.err;
  const double bounded_ms = Figure(bounded.out, "OVERALL", "RunTime(ms)");
  EXPECT_GE(bounded_ms, 900) << bounded.out;
  EXPECT_LT(bounded_ms, 5000) << bounded.out;
}

// -db nova against a local cluster: 3 nova_stoc and 2 nova_ltc processes, the "user..."
// key space split into 3 ranges (at "user3" and "user6") across the two LTCs, so that
// reads, updates and scans cross ranges and LTCs.
class YcsbNovaItest : public ::testing::Test {
 protected:
  static constexpr int kStocs = 3;

  void SetUp() override {
    dir_ = test::TestTempDir("ycsb_itest_nova_cluster");
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    std::string stoc_list;
    for (int id = 1; id <= kStocs; ++id) {
      daemons_.push_back(std::make_unique<test::ExternalDaemon>(test::StocDaemonOptions(
          dir_, secret.value(), id, {"--stoc_memory_limit_mb=128", "--stoc_file_buffer_mb=32"})));
      Status s = daemons_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stoc_list += (stoc_list.empty() ? "" : ",") + std::to_string(id) + "@" +
                   daemons_.back()->address();
    }
    // "user3" = 75 73 65 72 33, "user6" = ... 36.
    const char* kBounds = "--range_bounds=7573657233,7573657236";
    for (int i = 1; i <= 2; ++i) {
      daemons_.push_back(std::make_unique<test::ExternalDaemon>(test::LtcDaemonOptions(
          dir_, secret.value(), "ltc-" + std::to_string(i),
          {"--engine=nova", "--ltc_id=" + std::to_string(i), kBounds,
           i == 1 ? "--ltc_ranges=0,1" : "--ltc_ranges=2", "--stoc=" + stoc_list,
           "--ltc_memtable_size_mb=1", "--ltc_sstable_size_mb=1"})));
      Status s = daemons_.back()->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      ltcs_ += (ltcs_.empty() ? "" : ",") + daemons_.back()->address();
    }
  }

  void TearDown() override {
    // LTCs first (they flush to the StoCs on shutdown), then the StoCs.
    while (!daemons_.empty()) daemons_.pop_back();
  }

  std::string dir_;
  std::string ltcs_;  // "host:port,host:port"
  std::vector<std::unique_ptr<test::ExternalDaemon>> daemons_;
};

TEST_F(YcsbNovaItest, LoadRunWorkloadAWithDataIntegrity) {
  LoadAndRunWorkloadA("nova", " -p nova.ltc=" + ltcs_);
}

TEST_F(YcsbNovaItest, ScansAndInsertsAcrossRanges) {
  // workloade: 95% scans (up to 10 records here) and 5% inserts, with ordered keys so that
  // scans run over range and LTC boundaries.
  const std::string dir = test::TestTempDir("ycsb_itest_nova_e");
  const std::string common = " -db nova -p nova.ltc=" + ltcs_ + " -P " + Workload("workloade") +
                             " -p recordcount=1000 -p insertorder=ordered -p fieldlength=32" +
                             " -p dataintegrity=true -p maxscanlength=10 -threads 2";
  Proc load = Shell(Ycsb() + " -load" + common, dir);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  EXPECT_EQ(Figure(load.out, "INSERT", "Return=OK"), 1000) << load.out;
  Proc run = Shell(Ycsb() + " -run -p operationcount=1000" + common, dir);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GT(Figure(run.out, "SCAN", "Return=OK"), 0) << run.out;
  EXPECT_EQ(run.out.find("Return=ERROR"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("-FAILED]"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace nova::ycsb
