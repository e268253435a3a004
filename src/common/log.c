/* log: timestamped, leveled log lines to a file (daemons) or stderr. */
#include "common/common.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *log_fp;
static char log_ident[32] = "mtc";
static int log_level = LOG_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *level_names[] = {"emerg",   "alert",  "crit", "err",
                                    "warning", "notice", "info", "debug"};

int log_open(const char *path, const char *ident, int level)
{
    FILE *fp = NULL;
    if (path) {
        fp = fopen(path, "ae");
        if (!fp)
            return -1;
        setvbuf(fp, NULL, _IOLBF, 0);
    }
    pthread_mutex_lock(&log_lock);
    if (log_fp)
        fclose(log_fp);
    log_fp = fp;
    if (ident)
        snprintf(log_ident, sizeof(log_ident), "%s", ident);
    log_level = level;
    pthread_mutex_unlock(&log_lock);
    return 0;
}

void log_close(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_fp)
        fclose(log_fp);
    log_fp = NULL;
    pthread_mutex_unlock(&log_lock);
}

void log_msg(int level, const char *fmt, ...)
{
    int saved = errno;
    if (level > log_level) {
        errno = saved;
        return;
    }
    char ts[40];
    mtc_time_rfc3339(mtc_now_ms(), ts, sizeof(ts));
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    FILE *fp = log_fp ? log_fp : stderr;
    fprintf(fp, "%s %s[%d] %s: %s\n", ts, log_ident, (int)getpid(), level_names[level & 7], msg);
    fflush(fp);
    pthread_mutex_unlock(&log_lock);
    errno = saved;
}

const char *log_vformat(int level, char *buf, size_t len, const char *fmt, va_list ap)
{
    vsnprintf(buf, len, fmt, ap);
    log_msg(level, "%s", buf);
    return buf;
}
