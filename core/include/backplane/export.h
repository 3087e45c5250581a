// Symbols of libbackplane_core that plugins, tools and tests may use. Everything
// else in the core is hidden (-fvisibility=hidden).
#pragma once

#define BACKPLANE_API __attribute__((visibility("default")))
