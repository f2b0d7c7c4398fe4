#include "driftscope.h"

extern "C" const char* ds_version(void) { return DRIFTSCOPE_VERSION; }
