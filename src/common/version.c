/* version: mtc's version, one string for every program, /healthz and the
 * package. It lives in the VERSION file at the top of the tree; the Makefile
 * passes it to this file alone (so a new version rebuilds one object). Also
 * how every program's subcommands recognise a request for their usage. */
#include "common/common.h"

#include <string.h>

#ifndef MTC_VERSION
#error "MTC_VERSION comes from the VERSION file through the Makefile"
#endif

const char *mtc_version(void)
{
    return MTC_VERSION;
}

int mtc_wants_help(int argc, char *const argv[])
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}
