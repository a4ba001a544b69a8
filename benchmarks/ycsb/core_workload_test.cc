// CoreWorkload: key names, insert order, deterministic values and verification, the
// operation mix, and the record codec, against an in-memory DB.
#include "benchmarks/ycsb/core_workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "benchmarks/ycsb/record_codec.h"
#include "tests/util/test_util.h"

namespace nova::ycsb {
namespace {

// A DB over a std::map, with the embedded bindings' semantics (records encoded).
class MapDB : public DB {
 public:
  ReturnCode Read(std::string_view, std::string_view key, const std::vector<std::string>* fields,
                  Record* result) override {
    ++reads;
    auto it = rows.find(std::string(key));
    if (it == rows.end()) return ReturnCode::kNotFound;
    return DecodeRecord(it->second, fields, result) ? ReturnCode::kOk : ReturnCode::kError;
  }
  ReturnCode Scan(std::string_view, std::string_view start, int count,
                  const std::vector<std::string>* fields, std::vector<Record>* out) override {
    ++scans;
    scan_lengths.insert(count);
    for (auto it = rows.lower_bound(std::string(start)); it != rows.end() && count-- > 0; ++it) {
      out->emplace_back();
      DecodeRecord(it->second, fields, &out->back());
    }
    return ReturnCode::kOk;
  }
  ReturnCode Update(std::string_view, std::string_view key, const Record& values) override {
    ++updates;
    auto it = rows.find(std::string(key));
    if (it == rows.end()) return ReturnCode::kNotFound;
    Record r;
    DecodeRecord(it->second, nullptr, &r);
    MergeRecord(values, &r);
    it->second.clear();
    EncodeRecord(r, &it->second);
    return ReturnCode::kOk;
  }
  ReturnCode Insert(std::string_view, std::string_view key, const Record& values) override {
    ++inserts;
    std::string v;
    EncodeRecord(values, &v);
    rows[std::string(key)] = v;
    return ReturnCode::kOk;
  }
  ReturnCode Delete(std::string_view, std::string_view key) override {
    rows.erase(std::string(key));
    return ReturnCode::kOk;
  }

  std::map<std::string, std::string> rows;
  int reads = 0, scans = 0, updates = 0, inserts = 0;
  std::set<int> scan_lengths;
};

CoreWorkloadOptions Options(std::initializer_list<std::pair<const char*, const char*>> kv) {
  Properties p;
  p.Set("recordcount", "1000");
  p.Set("operationcount", "1000");
  for (const auto& [k, v] : kv) p.Set(k, v);
  Result<CoreWorkloadOptions> o = CoreWorkloadOptions::FromProperties(p);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return *o;
}

TEST(CoreWorkloadTest, KeyNames) {
  Measurements m;
  CoreWorkload ordered(Options({{"insertorder", "ordered"}, {"zeropadding", "8"}}), &m);
  EXPECT_EQ(ordered.BuildKeyName(42), "user00000042");
  EXPECT_EQ(ordered.BuildKeyName(123456789), "user123456789");
  CoreWorkload hashed(Options({}), &m);
  EXPECT_EQ(hashed.BuildKeyName(42), "user" + std::to_string(YcsbHash(42)));
}

TEST(CoreWorkloadTest, HashedInsertOrderIsAPermutation) {
  Measurements m;
  CoreWorkload w(Options({}), &m);
  std::set<std::string> keys;
  bool sorted = true;
  std::string prev;
  for (uint64_t i = 0; i < 100000; ++i) {
    std::string k = w.BuildKeyName(i);
    if (!prev.empty() && k < prev) sorted = false;
    prev = k;
    keys.insert(std::move(k));
  }
  EXPECT_EQ(keys.size(), 100000u);  // distinct: a permutation of the key numbers
  EXPECT_FALSE(sorted);             // and not in key order
}

TEST(CoreWorkloadTest, DeterministicValues) {
  // Java: "k:f".hashCode() == 107*31*31 + 58*31 + 102 == 104727
  EXPECT_EQ(CoreWorkload::JavaHashCode("k:f"), 104727);
  EXPECT_EQ(CoreWorkload::BuildDeterministicValue("k", "f", 10), "k:f:104727");
  EXPECT_EQ(CoreWorkload::BuildDeterministicValue("k", "f", 2), "k:");
  // Java's int hashCode overflows: the value must show negative numbers for long text.
  const std::string v = CoreWorkload::BuildDeterministicValue("user123", "field0", 1024);
  EXPECT_EQ(v.size(), 1024u);
  EXPECT_EQ(v.rfind("user123:field0:", 0), 0u);
  EXPECT_NE(v.find(":-"), std::string::npos);
}

TEST(CoreWorkloadTest, DataIntegrityRoundTripAndDetection) {
  Measurements m;
  CoreWorkload w(Options({{"dataintegrity", "true"}, {"fieldcount", "3"}, {"fieldlength", "50"}}),
                 &m);
  Rng rng(1);
  const std::string key = w.BuildKeyName(7);
  Record values = w.BuildValues(key, &rng);
  ASSERT_EQ(values.size(), 3u);
  std::string encoded;
  EncodeRecord(values, &encoded);
  Record decoded;
  ASSERT_TRUE(DecodeRecord(encoded, nullptr, &decoded));
  EXPECT_EQ(w.VerifyRow(key, decoded), ReturnCode::kOk);
  EXPECT_EQ(w.VerifyRow(w.BuildKeyName(8), decoded), ReturnCode::kUnexpectedState);
  decoded[1].second[10] ^= 1;
  EXPECT_EQ(w.VerifyRow(key, decoded), ReturnCode::kUnexpectedState);
  EXPECT_EQ(w.VerifyRow(key, Record{}), ReturnCode::kError);
  const MeasurementsSnapshot s = m.Snapshot();
  const auto& v = s.returns[static_cast<int>(OpType::kVerify)];
  EXPECT_EQ(v[static_cast<int>(ReturnCode::kOk)], 1u);
  EXPECT_EQ(v[static_cast<int>(ReturnCode::kUnexpectedState)], 2u);
  EXPECT_EQ(v[static_cast<int>(ReturnCode::kError)], 1u);
}

TEST(CoreWorkloadTest, RecordCodec) {
  Record r{{"a", "1"}, {"bb", std::string("x\0y", 3)}, {"c", ""}};
  std::string enc;
  EncodeRecord(r, &enc);
  Record all, some;
  ASSERT_TRUE(DecodeRecord(enc, nullptr, &all));
  EXPECT_EQ(all, r);
  const std::vector<std::string> want{"bb"};
  ASSERT_TRUE(DecodeRecord(enc, &want, &some));
  EXPECT_EQ(some, (Record{{"bb", std::string("x\0y", 3)}}));
  EXPECT_FALSE(DecodeRecord(enc.substr(0, enc.size() - 2), nullptr, &all));
  MergeRecord({{"bb", "new"}, {"d", "4"}}, &r);
  EXPECT_EQ(r, (Record{{"a", "1"}, {"bb", "new"}, {"c", ""}, {"d", "4"}}));
}

TEST(CoreWorkloadTest, LoadThenRunVerifiesEveryRead) {
  Measurements m;
  const CoreWorkloadOptions o = Options({{"dataintegrity", "true"},
                                         {"readproportion", "0.4"},
                                         {"updateproportion", "0.2"},
                                         {"insertproportion", "0.1"},
                                         {"scanproportion", "0.1"},
                                         {"readmodifywriteproportion", "0.2"},
                                         {"maxscanlength", "10"},
                                         {"requestdistribution", "zipfian"}});
  CoreWorkload w(o, &m);
  MapDB db;
  Rng rng(test::TestSeed("LoadThenRunVerifiesEveryRead"));
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(w.DoInsert(&db, &rng));
  EXPECT_EQ(db.rows.size(), 1000u);
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(w.DoTransaction(&db, &rng));
  const MeasurementsSnapshot s = m.Snapshot();
  const auto& verify = s.returns[static_cast<int>(OpType::kVerify)];
  EXPECT_GT(verify[static_cast<int>(ReturnCode::kOk)], 2000u);
  EXPECT_EQ(verify[static_cast<int>(ReturnCode::kUnexpectedState)], 0u);
  EXPECT_EQ(verify[static_cast<int>(ReturnCode::kError)], 0u);
  // Run-phase inserts continue after the loaded key numbers and are acknowledged.
  EXPECT_GT(w.LastInsertedKeynum(), 1000u + 400);
  EXPECT_EQ(db.rows.size(), w.LastInsertedKeynum() + 1);
  EXPECT_EQ(s.returns[static_cast<int>(OpType::kRead)][static_cast<int>(ReturnCode::kNotFound)], 0u);
  for (int len : db.scan_lengths) {
    EXPECT_GE(len, 1);
    EXPECT_LE(len, 10);
  }
}

TEST(CoreWorkloadTest, OperationMixFollowsProportions) {
  Measurements m;
  CoreWorkload w(Options({{"readproportion", "0.5"}, {"updateproportion", "0.5"}}), &m);
  Rng rng(3);
  int reads = 0;
  constexpr int kOps = 100000;
  for (int i = 0; i < kOps; ++i) reads += w.NextOperation(&rng) == Operation::kRead;
  EXPECT_NEAR(reads / double(kOps), 0.5, 0.01);
}

TEST(CoreWorkloadTest, WriteAllFieldsAndSingleField) {
  Measurements m;
  CoreWorkload w(Options({{"fieldcount", "4"}, {"fieldlength", "16"}}), &m);
  Rng rng(5);
  const Record one = w.BuildSingleValue("k", &rng);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].first.rfind("field", 0), 0u);
  EXPECT_EQ(one[0].second.size(), 16u);
  EXPECT_EQ(w.BuildValues("k", &rng).size(), 4u);
}

TEST(CoreWorkloadTest, KeyChoosersStayInKeySpace) {
  for (const char* dist : {"uniform", "zipfian", "orderedzipfian", "latest", "hotspot"}) {
    Measurements m;
    CoreWorkload w(Options({{"requestdistribution", dist}, {"insertproportion", "0.5"}}), &m);
    Rng rng(9);
    for (int i = 0; i < 20000; ++i) EXPECT_LE(w.NextKeynum(&rng), 999u) << dist;
  }
}


// A fixed seed for the distribution tests below, printed so a failure names it.
constexpr uint64_t kFixedSeed = 18;
Rng FixedSeedRng(const char* test) {
  std::printf("%s: seed %llu\n", test, static_cast<unsigned long long>(kFixedSeed));
  return Rng(kFixedSeed);
}

// Draw counts of NextKeynum over `draws` draws; every key must be in [0, keys).
std::vector<int> KeyCounts(CoreWorkload* w, Rng* rng, uint64_t keys, int draws) {
  std::vector<int> counts(keys);
  for (int i = 0; i < draws; ++i) {
    const uint64_t k = w->NextKeynum(rng);
    EXPECT_LT(k, keys);
    if (k < keys) ++counts[k];
  }
  return counts;
}

TEST(CoreWorkloadTest, OrderedZipfianMakesKeyZeroTheHottest) {
  Rng rng = FixedSeedRng("OrderedZipfianMakesKeyZeroTheHottest");
  Measurements m;
  CoreWorkload w(Options({{"requestdistribution", "orderedzipfian"}}), &m);
  constexpr int kDraws = 100000;
  const std::vector<int> counts = KeyCounts(&w, &rng, 1000, kDraws);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], counts[10]);
  EXPECT_GT(counts[10], counts[999]);
  // Key 0 draws 1/zeta(1000, 0.99) of the operations, key 1 2^-0.99 of that.
  const double p0 = 1.0 / ZipfianZeta(1000, kZipfianConstant);
  EXPECT_NEAR(counts[0] / double(kDraws), p0, 0.1 * p0);
  EXPECT_NEAR(counts[1] / double(kDraws), p0 * std::pow(0.5, kZipfianConstant), 0.1 * p0);
  // The scrambled zipfian's hottest key is elsewhere: YCSB's fnvhash64(0) % 1001 (its key
  // space is [insertstart, insertstart + insertcount + expected inserts], both ends in).
  CoreWorkload scrambled(Options({{"requestdistribution", "zipfian"}}), &m);
  const std::vector<int> s = KeyCounts(&scrambled, &rng, 1000, kDraws);
  EXPECT_EQ(std::max_element(s.begin(), s.end()) - s.begin(),
            static_cast<long>(YcsbHash(0) % 1001));
}

TEST(CoreWorkloadTest, ZipfianConstantChangesTheSkew) {
  Rng rng = FixedSeedRng("ZipfianConstantChangesTheSkew");
  constexpr int kDraws = 100000;
  double previous = 0;  // the share of keys 0..9 with the previous (smaller) constant
  for (const char* theta : {"0.5", "0.99", "1.3"}) {
    Measurements m;
    CoreWorkload w(Options({{"requestdistribution", "orderedzipfian"},
                            {"zipfianconstant", theta}}), &m);
    EXPECT_EQ(w.options().zipfianconstant, std::stod(theta));
    const std::vector<int> counts = KeyCounts(&w, &rng, 1000, kDraws);
    int top = 0;
    for (int i = 0; i < 10; ++i) top += counts[i];
    const double share = top / double(kDraws);
    std::printf("zipfianconstant %s: keys 0..9 draw %.3f\n", theta, share);
    EXPECT_GT(share, previous + 0.05) << theta;
    previous = share;
  }
}

TEST(CoreWorkloadTest, ZipfianConstantReachesScanLengthsAndLatest) {
  Rng rng = FixedSeedRng("ZipfianConstantReachesScanLengthsAndLatest");
  // Scan lengths: with a steeper constant more scans have the minimum length.
  auto ones = [&rng](const char* theta) {
    Measurements m;
    CoreWorkload w(Options({{"readproportion", "0"}, {"updateproportion", "0"},
                            {"scanproportion", "1"}, {"scanlengthdistribution", "zipfian"},
                            {"maxscanlength", "100"}, {"zipfianconstant", theta}}), &m);
    MapDB db;
    for (int i = 0; i < 1000; ++i) EXPECT_TRUE(w.DoInsert(&db, &rng));
    int n = 0;
    for (int i = 0; i < 5000; ++i) {
      db.scan_lengths.clear();
      w.DoTransaction(&db, &rng);
      n += db.scan_lengths.count(1) > 0;
    }
    return n;
  };
  EXPECT_GT(ones("1.5"), ones("0.5") + 1000);
  // latest: with a steeper constant more operations hit the newest key.
  auto newest = [&rng](const char* theta) {
    Measurements m;
    CoreWorkload w(Options({{"requestdistribution", "latest"}, {"zipfianconstant", theta}}),
                   &m);
    int n = 0;
    for (int i = 0; i < 20000; ++i) n += w.NextKeynum(&rng) == w.LastInsertedKeynum();
    return n;
  };
  EXPECT_GT(newest("1.5"), newest("0.5") + 2000);
}

TEST(CoreWorkloadTest, OrderedZipfianGrowsWithInserts) {
  // An insert-heavy run: the key space leaves room for the expected inserts (YCSB's
  // fudge factor 2), reads never pick a key whose insert was not acknowledged, and the
  // hot keys stay the first ones.
  Rng rng = FixedSeedRng("OrderedZipfianGrowsWithInserts");
  Measurements m;
  CoreWorkload w(Options({{"requestdistribution", "orderedzipfian"},
                          {"readproportion", "0.5"},
                          {"updateproportion", "0"},
                          {"insertproportion", "0.5"},
                          {"dataintegrity", "true"}}),
                 &m);
  MapDB db;
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(w.DoInsert(&db, &rng));
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(w.DoTransaction(&db, &rng));
  EXPECT_GT(w.LastInsertedKeynum(), 1000u + 400);
  EXPECT_EQ(db.rows.size(), w.LastInsertedKeynum() + 1);
  const MeasurementsSnapshot s = m.Snapshot();
  EXPECT_EQ(s.returns[static_cast<int>(OpType::kRead)][static_cast<int>(ReturnCode::kNotFound)], 0u);
  EXPECT_EQ(s.returns[static_cast<int>(OpType::kVerify)][static_cast<int>(ReturnCode::kOk)],
            s.returns[static_cast<int>(OpType::kRead)][static_cast<int>(ReturnCode::kOk)]);
  std::vector<int> counts = KeyCounts(&w, &rng, w.LastInsertedKeynum() + 1, 50000);
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], counts[10]);
}

}  // namespace
}  // namespace nova::ycsb
