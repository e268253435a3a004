/* version: mtc's version, one string for every program, /healthz and the
 * package. It lives in the VERSION file at the top of the tree; the Makefile
 * passes it to this file alone (so a new version rebuilds one object). */
#include "common/common.h"

#ifndef MTC_VERSION
#error "MTC_VERSION comes from the VERSION file through the Makefile"
#endif

const char *mtc_version(void)
{
    return MTC_VERSION;
}
