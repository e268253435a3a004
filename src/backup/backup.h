/* backup: mtcd's state as one file, and back (issue 43) — a consistent copy
 * of the store taken while mtcd serves writes (VACUUM INTO on a second,
 * read-only connection: a WAL snapshot, never a file copy) and everything
 * else a head needs from its home (each cluster's munge key, Slurm
 * configuration, certificates and keys, known_hosts, tokens' files), but no
 * model artifacts, datasets, experiments, image caches or logs: the backup
 * records where those are. Restored into an empty home, with mtcd stopped.
 *
 * The file: "MTC-BACKUP 1\n", a header line of HEADER bytes (JSON, padded
 * with blanks: mtcVersion, schemaVersion, created, bytes and sha256 of the
 * rest), then the rest: a manifest line (JSON: files, artifacts) and each
 * file's bytes in the manifest's order. */
#ifndef MTC_BACKUP_H
#define MTC_BACKUP_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "common/common.h"
#include "store/store.h"

/* What a backup file says of itself. */
struct backup_info {
    char mtc_version[64];
    int schema;          /* the store's schema version */
    int64_t created_ms;  /* when it was taken */
    int64_t bytes;       /* the whole file's */
    int files;           /* files of the home in it (the store's copy included) */
    char sha256[72];     /* "sha256:<hex>" of everything after the header */
};

/* A backup of mtcd's home (its store st, open, serving writes) written to
 * fd (a new, empty, seekable file: the header is written last). exclude
 * (may be NULL): a directory under home left out (the periodic backups').
 * extra (NULL-terminated, may be NULL): files from outside the home a head
 * needs (mtcd's TLS files) — with the SSH key each cluster's spec names, they
 * go in as external/<absolute path> (restored there under the new home; the
 * restore's record says where each came from). 0, or -1 + err. */
int backup_write(struct store *st, const char *home, const char *exclude,
                 const char *const *extra, int fd, struct backup_info *info, mtc_error_t *err);

/* Check an open backup file whole: its magic, header, size and checksum,
 * and a schema this mtc can open. 0, or -1 + err ("truncated: 1234 of 5678
 * bytes", "checksum mismatch", "schema version 40 is newer than this mtc's
 * 39"). */
int backup_check(int fd, struct backup_info *info, mtc_error_t *err);

/* Restore the backup file path into home, which must not exist or be empty
 * (mtcd stopped: nothing there to serve). The file must be its owner's only
 * (no group or other bits). Clusters of the local provider come back as
 * ERROR: their nodes were processes of the machine the backup was taken on.
 * 0, or -1 + err naming what was wrong; nothing is left in home on failure. */
int backup_restore(const char *path, const char *home, struct backup_info *info,
                   mtc_error_t *err);

/* Periodic backups (mtcd --backup-dir DIR --backup-every D --backup-keep N):
 * DIR/mtcd-YYYYmmddTHHMMSSZ.mtcbak written whole (temp + fsync + rename +
 * directory fsync), then the oldest beyond keep removed. The state the API
 * shows (/metrics, /healthz) is kept under a lock. */
struct backup_sched {
    char dir[4096];
    const char *const *extra; /* backup_write's */
    int64_t every_ms;
    int keep;
    pthread_mutex_t lock;
    /* the last attempt */
    int64_t last_ms, last_bytes, ok_total, failed_total;
    int64_t last_ok_ms; /* the last one that succeeded */
    int last_ok;
    char last_file[4096 + 64], last_error[256];
};
void backup_sched_init(struct backup_sched *s);
void backup_sched_release(struct backup_sched *s);
/* One backup into s->dir now, its outcome recorded in s. 0/-1 + err. */
int backup_sched_run(struct backup_sched *s, struct store *st, const char *home,
                     mtc_error_t *err);
/* s's state as the API's object: {dir, everySeconds, keep, lastTime, lastBytes, lastFile,
 * lastOk, lastError, okTotal, failedTotal} (new reference). */
json_t *backup_sched_json(struct backup_sched *s);

#endif
