// nova_ycsb: YCSB's client for Nova-LSM and the embedded baselines. See docs/ycsb.md and
// --help. YCSB's single-dash flags (-P repeated, -p name=value) are parsed by hand rather
// than with gflags, so that YCSB command lines work unchanged.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "benchmarks/ycsb/client.h"
#include "benchmarks/ycsb/command_line.h"
#include "benchmarks/ycsb/core_workload.h"
#include "benchmarks/ycsb/db_registry.h"

namespace nova::ycsb {
namespace {

bool KnownProperty(const std::string& name) {
  for (const char* prefix : {"leveldb.", "rocksdb.", "nova.", "measurement"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  for (const std::string& known : KnownPropertyNames()) {
    if (name == known) return true;
  }
  return false;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "nova_ycsb: %s\n", s.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  BindingRegistry registry;
  RegisterBuiltinBindings(&registry);
  Result<CommandLine> cl = ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (!cl.ok()) return Fail(cl.status());
  if (cl->help) {
    std::cout << UsageText(registry.Describe());
    return 0;
  }
  const Properties& props = cl->props;

  std::string command = "Command line:";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  std::cerr << command << std::endl;
  for (const auto& [name, value] : props.all()) {
    // YCSB ignores unknown properties; a typo then silently runs the default, so warn.
    if (!KnownProperty(name)) std::cerr << "warning: unknown property " << name << std::endl;
  }

  Result<CoreWorkloadOptions> workload_options = CoreWorkloadOptions::FromProperties(props);
  if (!workload_options.ok()) return Fail(workload_options.status());
  Result<ClientOptions> client_options = ClientOptions::FromProperties(props);
  if (!client_options.ok()) return Fail(client_options.status());
  const std::string db_name = props.Get("db");
  if (db_name.empty()) {
    return Fail(Status::InvalidArgument("no binding: give -db (leveldb, rocksdb or nova)"));
  }
  Result<std::unique_ptr<Binding>> binding = registry.Create(db_name, props);
  if (!binding.ok()) return Fail(binding.status());

  Measurements measurements;
  std::cerr << "Loading workload..." << std::endl;
  CoreWorkload workload(*workload_options, &measurements);
  std::cerr << "Starting test." << std::endl;
  Result<ClientResult> result =
      RunClient(*client_options, &workload, binding->get(), &measurements, &std::cerr);
  binding->reset();  // close the store before reporting, as YCSB's cleanup does
  if (!result.ok()) return Fail(result.status());

  const std::string report =
      ExportText(result->measurements, result->runtime_us, result->operations);
  const std::string export_file = props.Get("exportfile");
  if (export_file.empty()) {
    std::cout << report << std::flush;
  } else {
    std::ofstream out(export_file, std::ios::trunc);
    out << report;
    if (!out) return Fail(Status::IOError("cannot write exportfile " + export_file));
  }
  return 0;
}

}  // namespace
}  // namespace nova::ycsb

int main(int argc, char** argv) { return nova::ycsb::Main(argc, argv); }
