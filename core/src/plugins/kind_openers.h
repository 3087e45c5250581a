// The openers of plugin kinds that are no library (loader.h, detail::KindOpener), by
// kind, and what the loader does with one before opening: where its kernels can serve.
// Internal to the core.
#pragma once

#include <backplane/loader.h>

#include <optional>
#include <string>

namespace backplane::detail {

// The opener set for `kind`, or nullopt (a copy: set_kind_opener may replace it).
std::optional<KindOpener> find_kind_opener(const std::string& kind);

// `record` (Available, of a kind other than shared_library) with where it would serve:
// the opener's dispatch key and note, or Unavailable with why (no opener in this
// process, or the opener's reason). `opening`: for a load (else a listing: KindOpener).
// Never throws: a throwing opener is the reason.
BackendRecord with_kind_target(BackendRecord record, bool opening);

}  // namespace backplane::detail
