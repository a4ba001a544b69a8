// BindingRegistry: -db NAME -> the factory that opens that binding.
//
// Bindings are registered explicitly (RegisterBuiltinBindings), not by static
// initializers, so there is no global mutable state and a test can build a registry with
// its own fakes.
//
// Thread safety: thread-compatible; register everything before the first Create().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/properties.h"
#include "common/status.h"

namespace nova::ycsb {

// Opens a binding configured by the run's properties (its own are prefixed by its name:
// leveldb.dir, nova.zk, ...). Returns the Binding, or why it cannot be opened.
using BindingFactory = std::function<Result<std::unique_ptr<Binding>>(const Properties&)>;

class BindingRegistry {
 public:
  // `help` is one line for --help (the binding's properties). Replaces an earlier
  // registration of the same name.
  void Register(std::string name, std::string help, BindingFactory factory);
  // NotFound (listing the known names) for an unknown name; else what the factory returns.
  Result<std::unique_ptr<Binding>> Create(std::string_view name, const Properties& props) const;
  // "  name  help" lines for --help.
  std::string Describe() const;

 private:
  struct Entry {
    std::string help;
    BindingFactory factory;
  };
  std::map<std::string, Entry, std::less<>> entries_;
};

// Registers leveldb, rocksdb (or a stub explaining it was not built) and nova.
void RegisterBuiltinBindings(BindingRegistry* registry);

}  // namespace nova::ycsb
