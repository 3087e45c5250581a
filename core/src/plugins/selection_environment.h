// How this process differs from where a selection file was measured (its `environment:`,
// selection_file.h): each difference one phrase, for the one warning (or, strict, the
// refusal) applying the file gives.
#pragma once

#include <backplane/loader.h>
#include <backplane/selection_file.h>

#include <string>
#include <vector>

namespace backplane::detail {

// torch_here: torch.__version__ (empty: the version this core was built against, then
// compared without its local part, "+cu130"); devices_here: the devices the caller
// describes (a device type it does not describe is not compared); loaded: the plugins
// loaded, whose files are hashed only where the file records a hash.
std::vector<std::string> environment_differences(const SelectionEnvironment& measured, const std::string& torch_here,
                                                 const std::vector<SelectionDevice>& devices_here,
                                                 const std::vector<BackendRecord>& loaded);

}  // namespace backplane::detail
