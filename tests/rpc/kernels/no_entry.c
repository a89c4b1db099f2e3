/* An ordinary shared library, not a crosstune module: it has no crosstune_module_v1. */
int plain_function(int x) { return x + 1; }
