/* common: small policy-free helpers every mtc module uses — errors, logging,
 * files, names, subprocesses, time. Nothing here knows about clusters. */
#ifndef MTC_COMMON_H
#define MTC_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <syslog.h>

/* Human-readable detail for a failure, filled by the callee. */
typedef struct {
    char text[256];
} mtc_error_t;

/* Format into err (may be NULL). Always returns -1 so callers can
 * `return errprintf(err, ...)`. errno is preserved. */
int errprintf(mtc_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logging with syslog levels. log_open(NULL, ...) logs to stderr.
 * Messages above `level` are dropped. Thread-safe. */
int log_open(const char *path, const char *ident, int level);
void log_close(void);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Format fmt/ap into buf (len bytes) and log it at level: for a message that
 * is also shown elsewhere (progress lines, a daemon's last words). Returns buf. */
const char *log_vformat(int level, char *buf, size_t len, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Files. All return 0/-1 with errno unless noted. */
int mtc_mkdir_p(const char *path, mode_t mode);
/* path and everything below it, by descriptor (mtc_remove_at): symlinks
 * removed, never followed; a mount point below is not entered (EBUSY). A
 * missing path is removed already. */
int mtc_rm_rf(const char *path);
int mtc_path_exists(const char *path);
/* 1 when path is dir or below it, by name alone ("/a/bc" is not under "/a/b"):
 * both as given, no folding, no filesystem access. */
int mtc_path_under(const char *path, const char *dir);
/* An absolute path with "//" and "." folded — and ".." when fold, else it is
 * refused (EINVAL) — by name alone, no filesystem access, into out (len
 * bytes; ENAMETOOLONG when it does not fit). "/" for nothing left. */
int mtc_path_clean(const char *path, int fold, char *out, size_t len);
/* Read a whole file; NUL-terminated; *len (optional) gets the size. Caller frees. NULL+errno.
 * mtc_read_fd: the same from fd's offset to its end (fd stays open). */
char *mtc_read_file(const char *path, size_t *len);
char *mtc_read_fd(int fd, size_t *len);
/* All len bytes of data to fd (short writes and EINTR retried): 0/-1 + errno. */
int mtc_write_all(int fd, const void *data, size_t len);
/* fsync of the directory holding path (a rename in it is durable after): 0/-1 + errno. */
int mtc_fsync_parent(const char *path);
/* Write via a temp file (created with mode, never following a link) + fsync
 * + rename + fsync of the directory: the new content is on disk on return. */
int mtc_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* The same, with less of it on disk on return when the caller makes it so
 * later (several files of one directory, then one directory fsync):
 * MTC_WRITE_NO_DIRSYNC leaves out the directory's fsync, MTC_WRITE_NO_FSYNC
 * both fsyncs (the rename still replaces the file whole). */
#define MTC_WRITE_NO_DIRSYNC 1
#define MTC_WRITE_NO_FSYNC 3
int mtc_write_file_atomic_opt(const char *path, const void *data, size_t len, mode_t mode,
                              int flags);
int mtc_write_file_fmt(const char *path, mode_t mode, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A small file (read whole) copied to `to` as mtc_write_file_atomic writes it.
 * 0, or -1 + errno + err naming the file. */
int mtc_copy_file(const char *from, const char *to, mode_t mode, mtc_error_t *err);
/* Write text to path (0644, as mtc_write_file_atomic) when its content
 * differs. 1 changed, 0 same, -1 + err. */
int mtc_write_if_changed(const char *path, const char *text, mtc_error_t *err);

/* Unix users jobs run as (user.c). mtc_user_name_valid: useradd's pattern,
 * [a-z_][a-z0-9_-]{0,31}. mtc_user_lookup: name's uid, gid and home from the
 * password database; 0, or -1 + errno (EINVAL bad name, ENOENT no such user)
 * + err naming it. mtc_fsid_enter: this thread's file accesses checked as u
 * (and files it creates owned by u) until mtc_fsid_leave; does nothing
 * unless the process runs as root (then it already is whom it acts for). */
struct mtc_user {
    char name[33];
    char home[256];
    char shell[256];
    uid_t uid;
    gid_t gid;
};
#define MTC_FSID_GROUPS 64
struct mtc_fsid {
    uid_t uid;
    gid_t gid;
    int on, ngroups;
    gid_t groups[MTC_FSID_GROUPS]; /* this thread's own, back at _leave */
};
int mtc_user_name_valid(const char *s);
int mtc_user_lookup(const char *name, struct mtc_user *u, mtc_error_t *err);
void mtc_fsid_enter(const struct mtc_user *u, struct mtc_fsid *saved);
/* The user that stands for no one ("nobody", else uid and gid 65534): what
 * a token bound to no user may read is what every user may. */
void mtc_user_nobody(struct mtc_user *u);
void mtc_fsid_leave(struct mtc_fsid *saved);
/* The environment login(1) gives u (NULL: this process's user): HOME, USER,
 * LOGNAME and SHELL from the password database, PATH from /etc/login.defs
 * (ENV_SUPATH for uid 0, ENV_PATH for others; without them
 * /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin and
 * /usr/local/bin:/usr/bin:/bin). env[] ("K=V", NULL-terminated) points into
 * the struct. 0, or -1 + errno + err (no password entry). */
struct mtc_login_env {
    char home[270], user[48], logname[48], shell[270], path[512];
    char *env[6];
};
int mtc_login_env(const struct mtc_user *u, struct mtc_login_env *e, mtc_error_t *err);
/* What root reads on a user's behalf (a run's log, metrics, checkpoint
 * list; a job's image): path opened read-only with this thread's file ids
 * (the user's, between mtc_fsid_enter and _leave), no magic link followed
 * (openat2 RESOLVE_NO_MAGICLINKS), a regular file (dir: a directory), never
 * one on procfs, sysfs or another kernel filesystem (fstatfs) — mtcd's own
 * /proc/self is no user's to read (CAP_SYS_PTRACE survives setfsuid). An fd
 * (O_CLOEXEC, the caller closes), or -1 + errno (as open(2); EPERM: a kernel
 * filesystem's file; EINVAL: not a regular file, or not a directory). */
int mtc_open_as_user(const char *path, int dir);

/* Root acting for users (fsafe.c; DESIGN.md, "Security model"): directories
 * by descriptor, checked as they are opened. A trusted directory is owned by
 * root (or this process's euid) and writable by no one else unless sticky.
 *
 * mtc_dir_open_trusted: path (absolute, no "..") walked from "/" without
 * following a symlink but one a trusted directory's owner made, every
 * directory on the way trusted; create: missing ones made with mode. An
 * O_PATH|O_DIRECTORY fd (caller closes), or -1 + errno + err naming the
 * component (EPERM: one others could change).
 * mtc_dir_at: one component under dirfd the same way (create: mkdirat).
 * mtc_is_mount_at: 1 when name under dirfd ("" with the fd itself) is a
 * mount point, not followed when a symlink.
 * mtc_remove_at: name under dirfd and everything below it, every step
 * relative to a descriptor opened O_NOFOLLOW: a symlink or a directory swapped
 * in meanwhile removes at most an entry of this tree, never a file outside it;
 * mount points below are not entered (-1, EBUSY naming the first). Missing: 0. */
int mtc_dir_open_trusted(const char *path, int create, mode_t mode, mtc_error_t *err);
int mtc_dir_at(int dirfd, const char *name, int create, mode_t mode, mtc_error_t *err);
int mtc_is_mount_at(int dirfd, const char *name);
int mtc_remove_at(int dirfd, const char *name, mtc_error_t *err);

/* Who root acts for on a request's files, and where (fsafe.c): every path
 * is walked once, component by component, as `as` (mtc_fsid_enter; NULL:
 * root itself), and what follows is relative to the descriptors it gave.
 *   roots (NULL-terminated): the path must lie beneath one of them by name
 *   (else EACCES); the root itself is opened as root (an admin chose it;
 *   links root made in directories only root changes are followed), and
 *   beneath it no symbolic link is followed (EACCES naming it).
 *   roots NULL (an admin): from "/", following only links root made in
 *   directories no one else can change (EACCES for any other).
 *   trusted: the root, every directory beneath it and the end are ones only
 *   root can change (EPERM naming it): where root itself may write.
 * mtc_reach_open: the end of path, a regular file or (O_DIRECTORY: only) a
 * directory, opened O_RDONLY; with MTC_REACH_MKDIR a directory, made (0755,
 * owned by `as`) when missing. FIFOs and devices are never opened (EINVAL).
 * An fd (caller closes), or -1 + errno + err naming the path.
 * mtc_reach_at: name (one component) under dirfd the same way, as `as`, no
 * link followed.
 * mtc_copy_fd: in's bytes to out (then fsync); hex (65 bytes, or NULL) gets
 * their sha256. 0/-1 + errno.
 * mtc_copy_into: in's bytes into name under dirfd (mode), through a new
 * temporary name (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over name: whatever
 * name was (a link too) is replaced, never followed. Made with the calling
 * thread's fsuid. 0/-1 + err. */
struct mtc_reach {
    const char *const *roots;
    const struct mtc_user *as;
    int trusted;
};
#define MTC_REACH_MKDIR 0x40000000
int mtc_reach_open(const char *path, const struct mtc_reach *how, int flags, mtc_error_t *err);
int mtc_reach_at(int dirfd, const char *name, const struct mtc_reach *how, int flags,
                 mtc_error_t *err);
int mtc_copy_fd(int in, int out, char hex[65]);
int mtc_copy_into(int in, int dirfd, const char *name, mode_t mode, mtc_error_t *err);

/* Names: lowercase letter first, then [a-z0-9-], length 1..maxlen, no trailing '-'. */
int mtc_name_valid(const char *s, size_t maxlen);

/* proto3 JSON field names: "machine_type" → "machineType" into out (len bytes). */
void mtc_camel_case(const char *in, char *out, size_t len);

/* The directory of the running program (/proc/self/exe less its last
 * component) into buf. 0, or -1 with errno when it cannot be read. */
int mtc_exe_dir(char *buf, size_t len);
/* Find a data file shipped with mtc (catalog, recipes): $MTC_DATA_DIR, then
 * <exe>/../share/mtc, then <exe>/../../data and <exe>/../.. (source tree). Caller frees. */
char *mtc_data_path(const char *name);

/* Subprocesses. argv[0] is looked up in PATH. env: extra "K=V" strings
 * (NULL-terminated, may be NULL) added to the inherited environment.
 * mtc_run waits up to timeout_ms (<=0: forever) and returns the exit status
 * (0..255), 128+signal, or -1 (errno; ETIMEDOUT after kill). When out is
 * non-NULL, stdout+stderr are captured into a malloc'd string. */
int mtc_run(char *const argv[], char *const env[], char **out, int timeout_ms);
/* mtc_run with stdin data and separate stdout/stderr. Uncaptured streams are
 * inherited; stdin is /dev/null unless in is set (written, then closed; a
 * child that exits early does not raise SIGPIPE here). */
enum { MTC_IO_OUT = 1, MTC_IO_ERR = 2, MTC_IO_MERGE = 4 /* stderr into out */ };
struct mtc_io {
    const void *in; /* stdin bytes (borrowed), or NULL */
    size_t in_len;
    int capture;     /* MTC_IO_* */
    char *out, *err; /* set by mtc_run_io when captured (even on -1): caller frees */
    size_t out_len;  /* bytes in out (it may hold NULs: binary output) */
    /* With MTC_IO_ERR: called with each line of stderr (newline stripped) as
     * it arrives, from the calling thread (progress lines); may be NULL. */
    void (*err_line)(void *arg, const char *line);
    void *err_line_arg;
    int only_env; /* env is the child's whole environment: nothing of this process's */
    /* Descriptors the child inherits under the same numbers (above 2; -1
     * ends the list), close-on-exec here: only this child gets them. */
    const int *keep_fds;
};
int mtc_run_io(char *const argv[], char *const env[], struct mtc_io *io, int timeout_ms);
/* s single-quoted for a POSIX shell ("it's" → 'it'\''s'): one word, nothing
 * expanded. Caller frees; NULL when out of memory. */
char *mtc_shell_quote(const char *s);
/* Start a process detached in its own session, stdio to logpath (or /dev/null).
 * Returns its pid or -1. The caller reaps it (or lets init do it). */
pid_t mtc_spawn(char *const argv[], char *const env[], const char *logpath);
/* 1 if the pid exists and is not a zombie, else 0. */
int mtc_pid_alive(pid_t pid);
/* Read a pid file; 0 if missing or malformed. */
pid_t mtc_pid_read(const char *path);
/* SIGTERM, wait up to ms, then SIGKILL. Returns 0 once gone. */
int mtc_pid_stop(pid_t pid, int ms);
/* 1 when /proc/<pid>/<file> (NUL-separated: cmdline, environ) holds a and
 * (if given) b as whole entries; mtc_cmdline_has: in its argv. */
int mtc_proc_has(pid_t pid, const char *file, const char *a, const char *b);
/* systemd's notification (sd_notify(3)'s protocol, no libsystemd): state
 * ("READY=1", "STOPPING=1", "STATUS=...", newline-separated) as one datagram
 * to $NOTIFY_SOCKET (a path, or @name for an abstract socket). 0 when the
 * variable is unset (not run by systemd), 1 when sent, -1 + errno. */
int mtc_sd_notify(const char *state);
/* The systemd service a process runs in, from the text of its
 * /proc/PID/cgroup ("0::/system.slice/mtcd.service"): the last path
 * component when it ends in ".service", into unit. 1 found, 0 not. */
int mtc_cgroup_service(const char *cgroup, char *unit, size_t len);
/* KEY's value in a NUL-separated environment block of len bytes (what
 * /proc/<pid>/environ holds), or NULL. */
const char *mtc_environ_get(const char *env, size_t len, const char *key);
int mtc_cmdline_has(pid_t pid, const char *a, const char *b);
/* The lowest live pid (not a zombie, not this process) in this process's
 * mount namespace whose argv holds a and (if given) b as whole entries, else
 * 0: a daemon whose pid no file recorded (its starter died between the fork
 * and the record). A process of another mount namespace (a container, a test
 * host) with the same argv — a cluster host's munged names the same socket
 * path as the controller's — is never this one's daemon. */
pid_t mtc_cmdline_find(const char *a, const char *b);
/* The live processes (not zombies) of this host that mine(pid, arg) picks
 * and all their descendants, found through parent pids (a child with a
 * cleaned environment is found too), into out (at most max): by what /proc
 * says, never by name. This process and its parent are never included.
 * Returns the count (0 when /proc cannot be read or memory runs out). */
size_t mtc_proc_tree(int (*mine)(pid_t pid, void *arg), void *arg, pid_t *out, size_t max);


/* A rendezvous port (port.c): the ports a job may listen on — from
 * MTC_PORT_BASE up, outside the kernel's ephemeral range (outgoing
 * connections and TIME_WAIT hold its ports without listening) and its
 * reserved ports; when that range covers them all, any unreserved port from
 * 1024. count: how many there are. */
#define MTC_PORT_BASE 29500
struct mtc_port_rules {
    unsigned char excluded[65536 / 8];
    uint16_t ports[65536 - 1024]; /* the candidates, ascending */
    int count;
};
/* The rules from the texts of ip_local_port_range ("32768 60999") and
 * ip_local_reserved_ports ("8080,9000-9010"); NULL reads /proc's file (Linux's
 * defaults where it cannot). 0, or -1 + errno + err for a text it cannot read. */
int mtc_port_rules_init(struct mtc_port_rules *r, const char *range, const char *reserved,
                        mtc_error_t *err);
/* The i-th candidate (0 <= i < count) of a search that starts at the
 * (seed % count)-th port and strides over them (a prime stride, wrapping:
 * each once); 0 for another i. */
int mtc_port_candidate(const struct mtc_port_rules *r, unsigned long seed, int i);
/* Whether a listening socket can bind port now, as the ranks' store will: on
 * the wildcard ([::] dual stack, else 0.0.0.0) and on addr (NULL: skipped; an
 * address not of this host: skipped), without SO_REUSEADDR. The sockets are
 * closed before it returns. 0, or -1 + errno (EADDRINUSE: taken) + err. */
int mtc_port_bind_probe(const char *addr, int port, mtc_error_t *err);
/* The first candidate from seed that mtc_port_bind_probe binds, retried on
 * EADDRINUSE (and EACCES). The port, or -1 + errno + err (EADDRINUSE: none is
 * free; another errno: addr is wrong). */
int mtc_port_pick(const struct mtc_port_rules *r, const char *addr, unsigned long seed,
                  mtc_error_t *err);
/* A daemon's port (port.c): one that is free right now (bound on the
 * wildcard and released), from 20000 up to below MTC_PORT_BASE (a job's
 * rendezvous port is never one); 0 when none is found. */
int mtc_free_port(void);
/* count consecutive free ones from a random base: the first, or 0. */
int mtc_free_port_range(int count);
/* Hold port for owner (a cluster's id) while its daemon is not running:
 * bound with SO_REUSEADDR, not listening (a connection to it is refused), so
 * no pick above lands on it, while the daemon's own listener (SO_REUSEADDR)
 * binds beside it — released once the daemon runs. A port held is not a
 * port locked: any other listener with SO_REUSEADDR could bind it too.
 * Holding again for the same owner is a no-op. 0, or -1 + errno
 * (EADDRINUSE: another owner holds it, or a listener or a socket without
 * SO_REUSEADDR has it). Thread-safe; the holds are this process's
 * (close-on-exec). */
int mtc_port_hold(int port, const char *owner);
/* owner's hold on port ends (another owner's stays). */
void mtc_port_release(int port, const char *owner);
/* Every hold of owner ends (a cluster deleted); how many. */
int mtc_port_release_owner(const char *owner);
/* 1 when this process holds port, for any owner. */
int mtc_port_held(int port);
/* This host's name up to the first dot (slurmctld matches SlurmctldHost
 * against it), "localhost" when it has none. */
void mtc_short_hostname(char *buf, size_t len);

/* TensorBoard event files (tfevents.c): the TFRecord framing with masked
 * CRC-32C (Castagnoli) and the Event protobuf's scalars. */
uint32_t mtc_crc32c(const void *data, size_t n);
uint32_t mtc_crc32c_masked(const void *data, size_t n); /* TFRecord's mask of it */
struct mtc_scalar {
    int64_t step;
    double wall_time; /* the event's, epoch seconds */
    char tag[128];    /* truncated when longer */
    double value;
};
typedef void (*mtc_scalar_fn)(void *arg, const struct mtc_scalar *s);
/* Each scalar of the whole records in buf (len bytes) to fn; *used: the
 * bytes of those records. Stops at a record not all there yet, or at a
 * corrupt one (a CRC or its protobuf wrong: *corrupt = 1). The records read. */
long mtc_tfevents_parse(const unsigned char *buf, size_t len, size_t *used, int *corrupt,
                        mtc_scalar_fn fn, void *arg);
/* The same over the file path from byte *off on, *off advanced past what
 * was read (a record still being written is read next time); path opened
 * as mtc_open_as_user opens it (a regular file, not on procfs). The
 * records read, or -1 + errno when the file cannot be opened. */
long mtc_tfevents_read(const char *path, long long *off, int *corrupt, mtc_scalar_fn fn, void *arg);

/* mtc's version (the VERSION file), e.g. "0.1.0". */
const char *mtc_version(void);
/* 1 when argv[1..] (up to a "--") holds --help or -h: a (sub)command's
 * request for its usage. */
int mtc_wants_help(int argc, char *const argv[]);

/* Time. */
int64_t mtc_now_ms(void);
/* RFC 3339 UTC with milliseconds into buf (>= 32 bytes). */
char *mtc_time_rfc3339(int64_t ms, char *buf, size_t len);
void mtc_sleep_ms(int ms);
/* CLOCK_REALTIME ms from now, as pthread_cond_timedwait's deadline. */
struct timespec mtc_deadline_ms(int64_t ms);
/* A duration as people write it — "20s", "2m", "1.5h", "500ms", or plain
 * seconds ("90") — into *ms. At most 30 days; no sign, exponent or blank.
 * 0, or -1 with errno EINVAL (ERANGE past the bound). */
int mtc_duration_ms(const char *s, int64_t *ms);

/* Checked size arithmetic, for every size that comes from a file: *out = a * b (a + b).
 * 0, or -1 with errno EOVERFLOW (*out then undefined) when the result does not fit. */
int mtc_size_mul(size_t a, size_t b, size_t *out);
int mtc_size_add(size_t a, size_t b, size_t *out);

/* Random hex string of 2*nbytes chars into buf (size >= 2*nbytes+1). 0/-1. */
int mtc_random_hex(char *buf, size_t nbytes);
/* SHA-256 hex of s into out[65]. */
void mtc_sha256_hex(const char *s, char out[65]);
/* "sha256:<hex>" of a whole file's bytes into out[72] (an image's digest). 0,
 * or -1 + err "PATH: ..." when it cannot be opened, read or hashed. */
int mtc_sha256_file(const char *path, char out[72], mtc_error_t *err);
/* The same of an open file, read from offset 0 with pread (_from: from byte
 * at to its end). 0/-1 + errno. */
int mtc_sha256_fd(int fd, char out[72]);
int mtc_sha256_fd_from(int fd, off_t at, char out[72]);
/* 1 when path is a regular file starting with squashfs's magic "hsqs", 0 when
 * it is anything else (a FIFO or device is not opened for reading: no wait),
 * -1 + errno when it cannot be opened. */
int mtc_is_squashfs(const char *path);

/* Where mtcd is, for a helper program: its unix socket, or its URL
 * ("https://host:port"; wins when set) trusting ca_file; token: a bearer
 * token (NULL/"": none). */
struct mtc_mtcd {
    const char *socket, *url, *ca_file, *token;
};
/* POST body (JSON text) to mtcd's path ("/v1beta1/..."), waiting up to
 * timeout_s: 0 with the HTTP status (and the reply, caller frees, when reply
 * is set), or -1 + err when mtcd cannot be reached (http.c). */
int mtc_mtcd_post(const struct mtc_mtcd *m, const char *path, const char *body, int timeout_s,
                  long *status, char **reply, mtc_error_t *err);

/* Run fn(arg, i, &errs[i]) for every i in 0..n-1 on up to `threads` threads
 * (parallel.c); errs[i] gets each one's error. Returns the first index that
 * failed (-1 from fn), or -1 when all succeeded (or n is 0). */
typedef int (*mtc_task_fn)(void *arg, size_t i, mtc_error_t *err);
long mtc_parallel(size_t n, size_t threads, mtc_task_fn fn, void *arg, mtc_error_t *errs);

/* JSON accessors (jansson's json_t; common/json.c), NULL-safe: a missing
 * object, key or non-string value reads as absent. */
struct json_t;
/* The string at key, or NULL. */
const char *mtc_json_str(const struct json_t *o, const char *key);
/* The string at key, or dflt. */
const char *mtc_json_str_or(const struct json_t *o, const char *key, const char *dflt);
/* 1 when the array holds the string s (compared exactly), else 0. */
int mtc_json_array_has(const struct json_t *arr, const char *s);

#endif
