#include "ltc/server/range_slot.h"

namespace nova::ltc {

void RangeSlot::Set(std::shared_ptr<RangeBackend> backend) {
  MutexLock l(&mu_);
  backend_ = std::move(backend);
  last_error_ = Status::OK();
  opened_cv_.NotifyAll();
}

void RangeSlot::SetError(const Status& error) {
  MutexLock l(&mu_);
  last_error_ = error;
}

Result<std::shared_ptr<RangeBackend>> RangeSlot::Wait(std::chrono::milliseconds timeout) const {
  MutexLock l(&mu_);
  if (backend_ == nullptr && timeout.count() > 0) {
    opened_cv_.WaitUntil(&l, MonoNow() + timeout,
                         [&]() REQUIRES(mu_) { return backend_ != nullptr; });
  }
  if (backend_ != nullptr) return backend_;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(MonoNow() - since_);
  std::string why = "range " + std::to_string(range_id_) + " is being recovered (for " +
                    std::to_string(waited.count()) + " ms)";
  if (!last_error_.ok()) why += "; its last open attempt failed: " + last_error_.ToString();
  return Status::Unavailable(why);
}

std::shared_ptr<RangeBackend> RangeSlot::Take() {
  abandoned_ = true;
  MutexLock l(&mu_);
  return std::move(backend_);
}

std::shared_ptr<RangeBackend> RangeSlot::TryGet() const {
  MutexLock l(&mu_);
  return backend_;
}

std::string RangeSlot::StateText() const {
  auto b = Wait(std::chrono::milliseconds(0));
  return b.ok() ? b.value()->StatsText() : b.status().message();
}

}  // namespace nova::ltc
