#include "benchmarks/ycsb/db_registry.h"

#include "benchmarks/ycsb/leveldb_binding.h"
#include "benchmarks/ycsb/nova_binding.h"
#include "benchmarks/ycsb/rocksdb_binding.h"

namespace nova::ycsb {

void BindingRegistry::Register(std::string name, std::string help, BindingFactory factory) {
  entries_[std::move(name)] = Entry{std::move(help), std::move(factory)};
}

Result<std::unique_ptr<Binding>> BindingRegistry::Create(std::string_view name,
                                                         const Properties& props) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string known;
    for (const auto& [n, e] : entries_) known += (known.empty() ? "" : ", ") + n;
    return Status::NotFound("unknown binding -db " + std::string(name) + " (known: " + known +
                            ")");
  }
  return it->second.factory(props);
}

std::string BindingRegistry::Describe() const {
  std::string out;
  for (const auto& [name, e] : entries_) out += "  " + name + "\n      " + e.help + "\n";
  return out;
}

void RegisterBuiltinBindings(BindingRegistry* registry) {
  registry->Register("leveldb", kLevelDbBindingHelp, OpenLevelDbBinding);
  registry->Register("rocksdb", kRocksDbBindingHelp, OpenRocksDbBinding);
  registry->Register("nova", kNovaBindingHelp, OpenNovaBinding);
}

}  // namespace nova::ycsb
