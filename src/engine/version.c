/* version.c — the version of the library that was linked, to compare with the TG_VERSION_* of the header a
 * program was compiled with. */
#include "tg.h"

const char *tg_version(void) { return TG_VERSION_STRING; }
