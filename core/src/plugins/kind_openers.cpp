// Openers of plugin kinds that are no library, and their targets (kind_openers.h).
#include "plugins/kind_openers.h"

#include <map>
#include <mutex>

namespace backplane::detail {
namespace {

std::mutex& openers_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

std::map<std::string, KindOpener>& openers() {
  static auto* map = new std::map<std::string, KindOpener>();  // never destroyed: Python may call late
  return *map;
}

}  // namespace

void set_kind_opener(const std::string& kind, KindOpener opener) {
  std::lock_guard<std::mutex> lock(openers_mutex());
  openers()[kind] = std::move(opener);
}

std::optional<KindOpener> find_kind_opener(const std::string& kind) {
  std::lock_guard<std::mutex> lock(openers_mutex());
  auto found = openers().find(kind);
  if (found == openers().end()) return std::nullopt;
  return found->second;
}

BackendRecord with_kind_target(BackendRecord record, bool opening) {
  auto unavailable = [&](const std::string& why) {
    record.status = BackendStatus::Unavailable;
    record.reason = why;
    return record;
  };
  const std::optional<KindOpener> opener = find_kind_opener(record.kind);
  if (!opener)
    return unavailable("a plugin of kind " + record.kind + ": its kernels are Python launchers from package '" +
                       record.python_module + "', which load in a Python process that imports backplane (backplane.load('" +
                       record.name + "')) where its bridge, backplane._python_kernels, is built; this process has "
                       "no Python bridge (`backplane check " + record.name + "` checks it on the Python side)");
  KindTarget target;
  try {
    target = opener->target(record, opening);
  } catch (const std::exception& e) {
    return unavailable(std::string("checking where its kernels can run failed: ") + e.what());
  }
  if (!target.unavailable.empty()) return unavailable(target.unavailable);
  record.dispatch_key = target.dispatch_key;
  record.reason = target.note;
  return record;
}

}  // namespace backplane::detail
