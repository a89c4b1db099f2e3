// The release: the one place it is written. The top CMakeLists.txt reads it from here for
// project(crosstune VERSION ...) (the packages', the pkg-config file's and the wheel's version
// follow). A checked-in header rather than a generated one, so that every build tree (the default
// preset's, the wheel's, a sanitizer's) compiles the same command line and ccache serves one
// tree's objects to the next.
#pragma once

#define CROSSTUNE_VERSION_STRING "0.1.0"
