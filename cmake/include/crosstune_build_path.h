// The value of a path definition that cmake/CrosstunePathDefinitions.cmake took out of an
// executable's compile flags: CT_CLI="$<TARGET_FILE:crosstune>" there reaches the code as
// CT_CLI=CROSSTUNE_BUILD_PATH(CT_CLI), a const char* to the same text, which the executable's
// generated source holds. So every file of the executable compiles with the same flags in any
// clone (ccache hits), and only that small source names the folder. The build forces this header
// into those files (-include); a path is no longer a string literal, so it joins other text with
// std::string, not by literal concatenation ("run " CT_CLI).
#ifndef CROSSTUNE_BUILD_PATH_H_
#define CROSSTUNE_BUILD_PATH_H_

#ifdef __cplusplus
extern "C" {
#endif
// The path the build gave NAME; a name the executable was not given ends the process, saying so.
const char* crosstune_build_path(const char* name);
#ifdef __cplusplus
}
#endif

#define CROSSTUNE_BUILD_PATH(name) (crosstune_build_path(#name))

#endif  // CROSSTUNE_BUILD_PATH_H_
