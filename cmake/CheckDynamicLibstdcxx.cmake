# Fails the build when LIB carries its own copy of libstdc++ (it defines std::
# symbols and does not load libstdc++.so.6). A library with a
# private, static copy of libstdc++ crashes inside std::locale/std::regex once Python
# opens it (Python loads the shared libstdc++ RTLD_LOCAL, so the two copies mix).
# Seen on the GPU machine, whose default CXX wrapper links libstdc++ statically.
# Run as: cmake -DLIB=... -DREADELF=... -P CheckDynamicLibstdcxx.cmake
if(NOT READELF)
  return()
endif()
execute_process(COMMAND "${READELF}" -d "${LIB}" OUTPUT_VARIABLE _dynamic RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0 OR _dynamic MATCHES "libstdc\\+\\+\\.so")
  return()
endif()
# No libstdc++ dependency: fine for a library that uses no C++ library at all.
execute_process(COMMAND "${READELF}" --dyn-syms -W "${LIB}" OUTPUT_VARIABLE _symbols)
string(REGEX MATCH "[0-9]+ (FUNC|OBJECT) +[A-Z]+ +[A-Z]+ +[0-9]+ _ZNSt6locale" _own_locale "${_symbols}")
if(_own_locale)
  message(FATAL_ERROR "${LIB} does not depend on libstdc++.so.6: the C++ compiler linked libstdc++ statically, "
                      "and such a library crashes when Python loads it. Configure with a compiler that links it "
                      "dynamically, e.g. CXX=/usr/bin/g++ (and a fresh build directory).")
endif()
