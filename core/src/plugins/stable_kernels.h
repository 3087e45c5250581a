// The loader's use of the stable kernel path (stable_kernels.cpp, stable_api.h);
// init_stable_plugin is declared in backplane/loader.h.
#pragma once

#include <backplane/loader.h>
#include <backplane/plugin/stable_api.h>

namespace backplane::detail {

// The core's interface, as stable plugins receive it.
const BackplaneStableApi* stable_api();

}  // namespace backplane::detail
