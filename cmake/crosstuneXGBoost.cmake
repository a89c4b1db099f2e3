# xgboost::xgboost: the XGBoost library and its C API header, which crosstune::tuner links. Both
# the tuner's build and the installed package's config (crosstuneConfig.cmake, for
# find_package(crosstune COMPONENTS tuner)) include this file, so a consumer finds XGBoost the way
# the build did. Debian's own CMake config for xgboost also imports the `xgboost` command-line
# tool, a separate package, and fails without it; the library is found directly instead.
if(NOT TARGET xgboost::xgboost)
  find_path(CROSSTUNE_XGBOOST_INCLUDE_DIR xgboost/c_api.h)
  find_library(CROSSTUNE_XGBOOST_LIBRARY xgboost)
  if(CROSSTUNE_XGBOOST_INCLUDE_DIR AND CROSSTUNE_XGBOOST_LIBRARY)
    add_library(xgboost::xgboost UNKNOWN IMPORTED)
    set_target_properties(xgboost::xgboost PROPERTIES
      IMPORTED_LOCATION ${CROSSTUNE_XGBOOST_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${CROSSTUNE_XGBOOST_INCLUDE_DIR})
  endif()
endif()
