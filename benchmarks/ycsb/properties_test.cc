// Property parsing, the command line, and workload option validation.
#include "benchmarks/ycsb/properties.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "benchmarks/ycsb/client.h"
#include "benchmarks/ycsb/command_line.h"
#include "benchmarks/ycsb/core_workload.h"

namespace nova::ycsb {
namespace {

TEST(PropertiesTest, ParsesPropertiesText) {
  Properties p;
  ASSERT_TRUE(p.ParseText("# comment\n! also\n\n recordcount = 1000 \nworkload: x.CoreWorkload\n"
                          "readproportion=0.5\r\n",
                          "f")
                  .ok());
  EXPECT_EQ(p.Get("recordcount"), "1000");
  EXPECT_EQ(p.Get("workload"), "x.CoreWorkload");
  EXPECT_EQ(*p.GetDouble("readproportion", 0), 0.5);
  EXPECT_EQ(*p.GetInt("missing", 7), 7);
}

TEST(PropertiesTest, MalformedLineNamesFileAndLine) {
  Properties p;
  Status s = p.ParseText("a=1\njunk line\n", "wl");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wl:2"), std::string::npos) << s.ToString();
}

TEST(PropertiesTest, TypedGettersRejectGarbage) {
  Properties p;
  p.Set("n", "12x");
  p.Set("d", "zero");
  p.Set("b", "yes");
  p.Set("e", "");
  EXPECT_FALSE(p.GetInt("n", 0).ok());
  EXPECT_NE(p.GetInt("n", 0).status().message().find("n=12x"), std::string::npos);
  EXPECT_FALSE(p.GetDouble("d", 0).ok());
  EXPECT_FALSE(p.GetBool("b", false).ok());
  EXPECT_FALSE(p.GetInt("e", 0).ok());
  p.Set("b", "TRUE");
  EXPECT_TRUE(*p.GetBool("b", false));
}

TEST(PropertiesTest, Assignment) {
  Properties p;
  EXPECT_TRUE(p.ParseAssignment("a=b=c").ok());
  EXPECT_EQ(p.Get("a"), "b=c");
  EXPECT_FALSE(p.ParseAssignment("novalue").ok());
  EXPECT_FALSE(p.ParseAssignment("=x").ok());
}

TEST(CommandLineTest, FlagsOverrideFilesWhereverTheyAre) {
  const std::string path = ::testing::TempDir() + "/wl_cmdline";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("recordcount=10\nthreadcount=3\n", f);
    std::fclose(f);
  }
  Result<CommandLine> cl = ParseCommandLine(
      {"-p", "recordcount=99", "-P", path, "-run", "-db", "leveldb", "-threads", "4", "-s"});
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(cl->props.Get("recordcount"), "99");
  EXPECT_EQ(cl->props.Get("threadcount"), "4");
  EXPECT_EQ(cl->props.Get("dotransactions"), "true");
  EXPECT_EQ(cl->props.Get("status"), "true");
  EXPECT_EQ(cl->props.Get("db"), "leveldb");
}

TEST(CommandLineTest, Errors) {
  EXPECT_FALSE(ParseCommandLine({"-db", "x"}).ok());               // no phase
  EXPECT_FALSE(ParseCommandLine({"-load", "-run"}).ok());          // both phases
  EXPECT_FALSE(ParseCommandLine({"-load", "-p"}).ok());            // missing value
  EXPECT_FALSE(ParseCommandLine({"-load", "--bogus"}).ok());       // unknown flag
  EXPECT_FALSE(ParseCommandLine({"-load", "-P", "/nonexistent/wl"}).ok());
  EXPECT_TRUE(ParseCommandLine({"--help"})->help);
}

Properties Valid() {
  Properties p;
  p.Set("recordcount", "1000");
  p.Set("operationcount", "100");
  return p;
}

TEST(WorkloadOptionsTest, DefaultsAreYcsbs) {
  Result<CoreWorkloadOptions> o = CoreWorkloadOptions::FromProperties(Valid());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->fieldcount, 10);
  EXPECT_EQ(o->fieldlength, 100);
  EXPECT_DOUBLE_EQ(o->readproportion, 0.95);
  EXPECT_DOUBLE_EQ(o->updateproportion, 0.05);
  EXPECT_EQ(o->requestdistribution, KeyDistribution::kUniform);
  EXPECT_DOUBLE_EQ(o->zipfianconstant, 0.99);
  EXPECT_FALSE(o->orderedinserts);
  EXPECT_EQ(o->insertcount, 1000);
  EXPECT_EQ(o->maxscanlength, 1000);
  EXPECT_TRUE(o->readallfields);
  EXPECT_FALSE(o->writeallfields);
  EXPECT_EQ(o->table, "usertable");
}

TEST(WorkloadOptionsTest, RejectsBadInputWithClearMessages) {
  struct Case {
    const char* name;
    const char* value;
    const char* expect;  // substring of the message
  };
  const Case cases[] = {
      {"requestdistribution", "gaussian", "uniform, zipfian, orderedzipfian, latest or hotspot"},
      {"zipfianconstant", "1", "zipfianconstant=1: must be a finite number > 0 and != 1"},
      {"zipfianconstant", "0", "zipfianconstant=0"},
      {"zipfianconstant", "-0.5", "zipfianconstant=-0.5"},
      {"zipfianconstant", "1.0", "zipfianconstant=1.0"},
      {"zipfianconstant", "nan", "zipfianconstant=nan"},
      {"zipfianconstant", "inf", "zipfianconstant=inf"},
      {"zipfianconstant", "steep", "zipfianconstant=steep"},
      {"insertorder", "random", "hashed or ordered"},
      {"scanlengthdistribution", "constant", "uniform or zipfian"},
      {"fieldlengthdistribution", "histogram", "constant, uniform or zipfian"},
      {"readproportion", "1.5", "readproportion must be in [0, 1]"},
      {"updateproportion", "-0.1", "updateproportion"},
      {"recordcount", "0", "recordcount must be > 0"},
      {"recordcount", "ten", "recordcount=ten"},
      {"fieldcount", "0", "fieldcount"},
      {"maxscanlength", "0", "minscanlength/maxscanlength"},
      {"insertcount", "5000", "insertstart + insertcount > recordcount"},
      {"hotspotdatafraction", "2", "hotspot"},
      {"workload", "site.ycsb.workloads.RestWorkload", "only CoreWorkload"},
      {"dataintegrity", "maybe", "dataintegrity=maybe"},
  };
  for (const Case& c : cases) {
    Properties p = Valid();
    p.Set(c.name, c.value);
    Result<CoreWorkloadOptions> o = CoreWorkloadOptions::FromProperties(p);
    ASSERT_FALSE(o.ok()) << c.name << "=" << c.value;
    EXPECT_NE(o.status().message().find(c.expect), std::string::npos)
        << c.name << "=" << c.value << ": " << o.status().ToString();
  }
}

TEST(WorkloadOptionsTest, OrderedZipfianAndZipfianConstant) {
  Properties p = Valid();
  p.Set("requestdistribution", "orderedzipfian");
  p.Set("zipfianconstant", "1.2");
  Result<CoreWorkloadOptions> o = CoreWorkloadOptions::FromProperties(p);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->requestdistribution, KeyDistribution::kOrderedZipfian);
  EXPECT_DOUBLE_EQ(o->zipfianconstant, 1.2);
  const std::vector<std::string>& known = KnownPropertyNames();
  EXPECT_NE(std::find(known.begin(), known.end(), "zipfianconstant"), known.end());
}

TEST(WorkloadOptionsTest, DataIntegrityNeedsConstantFieldLength) {
  Properties p = Valid();
  p.Set("dataintegrity", "true");
  p.Set("fieldlengthdistribution", "uniform");
  Result<CoreWorkloadOptions> o = CoreWorkloadOptions::FromProperties(p);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("fieldlengthdistribution=constant"), std::string::npos);
  p.Set("fieldlengthdistribution", "constant");
  EXPECT_TRUE(CoreWorkloadOptions::FromProperties(p).ok());
}

TEST(WorkloadOptionsTest, AllProportionsZeroIsAnError) {
  Properties p = Valid();
  p.Set("readproportion", "0");
  p.Set("updateproportion", "0");
  EXPECT_FALSE(CoreWorkloadOptions::FromProperties(p).ok());
}

TEST(ClientOptionsTest, PhaseCounts) {
  Properties p = Valid();
  p.Set("dotransactions", "false");
  Result<ClientOptions> o = ClientOptions::FromProperties(p);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->operation_count, 1000);  // load: recordcount
  p.Set("insertcount", "250");
  EXPECT_EQ(ClientOptions::FromProperties(p)->operation_count, 250);
  p.Set("dotransactions", "true");
  EXPECT_EQ(ClientOptions::FromProperties(p)->operation_count, 100);
  p.Set("operationcount", "0");
  EXPECT_FALSE(ClientOptions::FromProperties(p).ok());  // unbounded
  p.Set("maxexecutiontime", "5");
  EXPECT_TRUE(ClientOptions::FromProperties(p).ok());
  p.Set("threadcount", "0");
  EXPECT_FALSE(ClientOptions::FromProperties(p).ok());
}

}  // namespace
}  // namespace nova::ycsb
