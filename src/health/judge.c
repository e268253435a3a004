/* judge: a speed against its peers' median — the one rule the agent's
 * straggler comparison (control/straggler.c), the health scanner's pairs and
 * burn-in (scan/, mtc-scan) share; pure, so mtc-scan links it without the
 * control plane. */
#include "health/health.h"

#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double health_median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int health_speed_judge(double value, double *peers, int npeers, double warn_fraction,
                        double fail_fraction, double *median, double *fraction)
{
    /* one peer is no majority: with two nodes either could be the slow one */
    if (npeers < HEALTH_SPEED_MIN_PEERS)
        return -1;
    double m = health_median(peers, npeers);
    if (m <= 0)
        return -1;
    *median = m;
    *fraction = value / m;
    if (*fraction < fail_fraction)
        return HEALTH_FAIL;
    return *fraction < warn_fraction ? HEALTH_WARN : HEALTH_PASS;
}
