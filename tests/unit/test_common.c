/* Unit tests for src/common: names, files, subprocesses, hashing. */
#include "check.h"
#include "common/common.h"

#include <jansson.h>

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* An error is one line whatever the input it quotes. */
static void test_errprintf_one_line(void)
{
    mtc_error_t err;
    errno = EINVAL;
    CHECK(errprintf(&err, "name \"%s\": bad", "a\nFAKE: line\r\t\x01") == -1 && errno == EINVAL,
          "errprintf returns -1 and keeps errno");
    CHECK_STR(err.text, "name \"a\\nFAKE: line\\r\\t\\x01\": bad",
              "control characters escaped: one line");
    char longs[600];
    memset(longs, '\n', sizeof(longs) - 1);
    longs[sizeof(longs) - 1] = '\0';
    errprintf(&err, "%s", longs);
    CHECK(strlen(err.text) < sizeof(err.text) && !strchr(err.text, '\n'),
          "truncated, still one line");
}

/* One shell word, nothing expanded (recipes' sbatch scripts, the hosts provider's ssh). */
static void collect_line(void *arg, const char *line)
{
    strcat(arg, line);
    strcat(arg, "|");
}

static void test_shell_quote(void)
{
    char *q = mtc_shell_quote("it's $HOME");
    CHECK_STR(q, "'it'\\''s $HOME'", "single quotes escape everything");
    free(q);
    q = mtc_shell_quote("");
    CHECK_STR(q, "''", "the empty word stays a word");
    free(q);
    q = mtc_shell_quote("''");
    CHECK_STR(q, "''\\'''\\'''", "quotes only");
    free(q);
    char *argv[] = {"sh", "-c", NULL, NULL}, *out = NULL, cmd[128];
    q = mtc_shell_quote("a'b \"$(x)\" `y` \\ *");
    snprintf(cmd, sizeof(cmd), "printf %%s %s", q ? q : "");
    argv[2] = cmd;
    CHECK(mtc_run(argv, NULL, &out, 5000) == 0, "quoted word runs");
    CHECK_STR(out, "a'b \"$(x)\" `y` \\ *", "the shell reads back the same bytes");
    free(out);
    free(q);
}

/* Threads of one process writing the same file at once: every write
 * succeeds, the file is one of them whole, no temporary file is left. */
#define WRITERS 8
static const char *atomic_path;

static void *atomic_writer(void *arg)
{
    char buf[64 * 1024];
    memset(buf, 'a' + (int)(intptr_t)arg, sizeof(buf));
    intptr_t fails = 0;
    for (int i = 0; i < 20; i++)
        fails += mtc_write_file_atomic(atomic_path, buf, sizeof(buf), 0640) < 0;
    return (void *)fails;
}

static void test_atomic_threads(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/shared.txt", dir);
    atomic_path = path;
    pthread_t t[WRITERS];
    for (intptr_t i = 0; i < WRITERS; i++)
        pthread_create(&t[i], NULL, atomic_writer, (void *)i);
    intptr_t fails = 0;
    for (int i = 0; i < WRITERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        fails += (intptr_t)r;
    }
    CHECK(fails == 0, "concurrent atomic writes of one file all succeed");
    size_t len = 0;
    char *s = mtc_read_file(path, &len);
    int whole = s && len == 64 * 1024;
    for (size_t i = 1; whole && i < len; i++)
        whole = s[i] == s[0];
    CHECK(whole, "the file is one writer's content, whole");
    free(s);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640, "its mode is the one asked for");
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "ls %s | grep -c tmp", dir);
    char *argv[] = {"sh", "-c", cmd, NULL}, *out = NULL;
    mtc_run(argv, NULL, &out, 5000);
    CHECK(out && atoi(out) == 0, "no temporary file left");
    free(out);
    /* without the fsyncs (a caller that fsyncs the directory later): the
     * same whole replacement, mode and no temporary file */
    static const int flags[] = {MTC_WRITE_NO_DIRSYNC, MTC_WRITE_NO_FSYNC};
    for (int f = 0; f < 2; f++) {
        CHECK(mtc_write_file_atomic_opt(path, "new\n", 4, 0600, flags[f]) == 0,
              "flags %d: written", flags[f]);
        s = mtc_read_file(path, &len);
        CHECK(s && len == 4 && strcmp(s, "new\n") == 0 && stat(path, &st) == 0 &&
                  (st.st_mode & 0777) == 0600,
              "flags %d: the new content whole, its mode", flags[f]);
        free(s);
    }
    out = NULL;
    mtc_run(argv, NULL, &out, 5000);
    CHECK(out && atoi(out) == 0, "no temporary file left by them either");
    free(out);
}

/* Durations as `mtc chaos --every` and `--timeout` take them. */
static void test_path_under(void)
{
    CHECK(mtc_path_under("/a/b", "/a/b") && mtc_path_under("/a/b/c", "/a/b"),
          "a directory and what is below it are under it");
    CHECK(!mtc_path_under("/a/bc", "/a/b") && !mtc_path_under("/a", "/a/b"),
          "a sibling sharing the prefix, and the parent, are not");
}

static void test_duration(void)
{
    static const struct {
        const char *s;
        int64_t ms;
    } good[] = {{"20s", 20000}, {"2m", 120000},   {"90", 90000}, {"1.5h", 5400000},
                {"500ms", 500}, {"0", 0},         {".5s", 500},  {"0.25m", 15000},
                {"30d", -1},    {"720h", 2592000000}};
    char what[64];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        int64_t ms = -7;
        int rc = mtc_duration_ms(good[i].s, &ms);
        snprintf(what, sizeof(what), "duration \"%s\"", good[i].s);
        if (good[i].ms < 0) /* no day unit: a plain error, not a guess */
            CHECK(rc == -1 && errno == EINVAL && ms == -7, what);
        else
            CHECK(rc == 0 && ms == good[i].ms, what);
    }
    static const char *const bad[] = {"", "s", "-5s", "+5s", "5 s", " 5s", "5x", "1e3",
                                      "5sec", "0x10", "inf", "nan", "5s ", "1..5s", "."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ms = -7;
        snprintf(what, sizeof(what), "duration \"%s\" refused, *ms untouched", bad[i]);
        CHECK(mtc_duration_ms(bad[i], &ms) == -1 && errno == EINVAL && ms == -7, what);
    }
    int64_t ms = -7;
    CHECK(mtc_duration_ms(NULL, &ms) == -1 && errno == EINVAL, "NULL refused");
    CHECK(mtc_duration_ms("721h", &ms) == -1 && errno == ERANGE && ms == -7, "past 30 days: ERANGE");
    CHECK(mtc_duration_ms("99999999999999999999999s", &ms) == -1 && errno == ERANGE,
          "a huge number: ERANGE, no overflow");
}

/* A process tree by parent pids: a shell, its two children and a
 * grandchild, picked by the shell's pid alone; none of this process's. */
static int is_root(pid_t pid, void *arg)
{
    return pid == *(pid_t *)arg;
}

static void test_proc_tree(void)
{
    char *argv[] = {"sh", "-c", "sleep 30 & (sleep 31 & wait) & wait", NULL};
    pid_t root = mtc_spawn(argv, NULL, NULL), pids[16];
    size_t n = 0;
    for (int i = 0; i < 100 && n < 5; i++, mtc_sleep_ms(20)) /* the children start */
        n = mtc_proc_tree(is_root, &root, pids, 16);
    int has_root = 0, has_self = 0;
    for (size_t i = 0; i < n; i++)
        has_root |= pids[i] == root, has_self |= pids[i] == getpid();
    /* sh, sleep 30, the subshell, sleep 31 (a shell may exec its last command) */
    CHECK(root > 0 && has_root && n >= 4 && !has_self,
          "mtc_proc_tree: the shell and its descendants (%zu), not this process", n);
    size_t m = mtc_proc_tree(is_root, &root, pids, 2);
    CHECK(m == 2, "at most max pids (%zu)", m);
    n = mtc_proc_tree(is_root, &root, pids, 16);
    for (size_t i = 0; i < n; i++)
        kill(pids[i], SIGKILL);
    mtc_pid_stop(root, 1000);
    for (int i = 0; i < 100 && (n = mtc_proc_tree(is_root, &root, pids, 16)) > 0; i++)
        mtc_sleep_ms(20);
    CHECK(n == 0, "killed: nothing left of it (zombies are not counted)");
}

/* Users jobs run as: names, lookup, and a thread's file identity switched
 * (as root: a root-only file is out of reach while acting for nobody). */
static void test_users(void)
{
    CHECK(mtc_user_name_valid("alice") && mtc_user_name_valid("_svc-1") &&
              !mtc_user_name_valid("Alice") && !mtc_user_name_valid("1a") &&
              !mtc_user_name_valid("a/b") && !mtc_user_name_valid("") &&
              !mtc_user_name_valid("a23456789012345678901234567890123"),
          "user names: useradd's pattern, at most 32");
    struct mtc_user u;
    mtc_error_t err = {""};
    CHECK(mtc_user_lookup("root", &u, &err) == 0 && u.uid == 0 && u.gid == 0 && *u.home,
          "root looked up");
    CHECK(mtc_user_lookup("nosuchuser-x", &u, &err) < 0 && errno == ENOENT &&
              strstr(err.text, "user nosuchuser-x: no such user"),
          "no such user: ENOENT, named: %s", err.text);
    CHECK(mtc_user_lookup("../etc", &u, &err) < 0 && errno == EINVAL, "a bad name: EINVAL");
    if (geteuid() != 0 || mtc_user_lookup("nobody", &u, &err) < 0)
        return;
    char path[] = "/tmp/mtc-unit-fsid-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && fchmod(fd, 0600) == 0, "a root-only file");
    close(fd);
    struct mtc_fsid id;
    mtc_fsid_enter(&u, &id);
    int as_nobody = open(path, O_RDONLY);
    int e = errno;
    mtc_fsid_leave(&id);
    int as_root = open(path, O_RDONLY);
    CHECK(as_nobody < 0 && e == EACCES && as_root >= 0,
          "acting for nobody: the root-only file is out of reach; after leaving it is not");
    if (as_nobody >= 0)
        close(as_nobody);
    if (as_root >= 0)
        close(as_root);
    /* readable by group root only: root's supplementary groups (0 among
     * them when mtcd runs from a root login) are not the user's */
    gid_t g0 = 0;
    CHECK(chmod(path, 0040) == 0 && chown(path, 0, 0) == 0 && setgroups(1, &g0) == 0,
          "a file readable by group root alone; this process in group 0");
    mtc_fsid_enter(&u, &id);
    as_nobody = open(path, O_RDONLY);
    e = errno;
    gid_t in[8];
    int n_in = getgroups(8, in);
    mtc_fsid_leave(&id);
    gid_t out[8];
    int n_out = getgroups(8, out);
    CHECK(as_nobody < 0 && e == EACCES, "acting for nobody: group root's file is out of reach");
    CHECK(n_in >= 1 && in[0] == u.gid && n_out == 1 && out[0] == 0,
          "the user's groups while acting for it (%d, first %d), root's after (%d)", n_in,
          n_in > 0 ? (int)in[0] : -1, n_out);
    if (as_nobody >= 0)
        close(as_nobody);
    unlink(path);
}

/* What root reads for a user: regular files and directories only, never
 * from procfs or sysfs (directly or through a symlink), a FIFO refused
 * without waiting for a writer, and with the thread's ids: out of reach
 * of nobody's what is root-only. */
static void test_open_as_user(void)
{
    char dir[] = "/tmp/mtc-unit-openas-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a directory");
    char f[sizeof(dir) + 16], link[sizeof(dir) + 16], fifo[sizeof(dir) + 16];
    snprintf(f, sizeof(f), "%s/log", dir);
    snprintf(link, sizeof(link), "%s/maps", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    CHECK(mtc_write_file_fmt(f, 0600, "line\n") == 0 && symlink("/proc/self/maps", link) == 0 &&
              mkfifo(fifo, 0600) == 0,
          "a file, a symlink to /proc/self/maps, a FIFO");
    char buf[8] = "";
    int fd = mtc_open_as_user(f, 0);
    CHECK(fd >= 0 && read(fd, buf, 5) == 5 && memcmp(buf, "line\n", 5) == 0,
          "a regular file: opened and read");
    if (fd >= 0)
        close(fd);
    errno = 0;
    CHECK(mtc_open_as_user("/proc/self/maps", 0) < 0 && errno == EPERM,
          "/proc/self/maps: refused (EPERM)");
    errno = 0;
    CHECK(mtc_open_as_user(link, 0) < 0 && errno == EPERM,
          "a symlink to /proc/self/maps: refused (EPERM)");
    errno = 0;
    CHECK(mtc_open_as_user("/sys/kernel/mm/transparent_hugepage/enabled", 0) < 0 &&
              (errno == EPERM || errno == ENOENT),
          "a sysfs file: refused");
    errno = 0;
    CHECK(mtc_open_as_user("/proc/self/fd/0", 0) < 0 && (errno == ELOOP || errno == EPERM),
          "a magic link: not followed");
    errno = 0;
    CHECK(mtc_open_as_user(fifo, 0) < 0 && errno == EINVAL, "a FIFO: EINVAL, at once");
    CHECK(mtc_open_as_user(f, 1) < 0 && errno == ENOTDIR, "a file asked as a directory: refused");
    fd = mtc_open_as_user(dir, 1);
    CHECK(fd >= 0, "a directory asked as one: opened");
    if (fd >= 0)
        close(fd);
    struct mtc_user u;
    mtc_error_t err = {""};
    if (geteuid() == 0 && mtc_user_lookup("nobody", &u, &err) == 0) {
        struct mtc_fsid id;
        mtc_fsid_enter(&u, &id);
        errno = 0;
        fd = mtc_open_as_user(f, 0);
        int e = errno;
        mtc_fsid_leave(&id);
        CHECK(fd < 0 && e == EACCES, "acting for nobody: root's 0600 file is EACCES");
        if (fd >= 0)
            close(fd);
    }
    unlink(f), unlink(link), unlink(fifo), rmdir(dir);
}

/* sd_notify's protocol: nothing without NOTIFY_SOCKET, one datagram to a
 * path or an abstract (@) socket with it, a bad address refused. */
static void test_sd_notify(void)
{
    unsetenv("NOTIFY_SOCKET");
    CHECK(mtc_sd_notify("READY=1") == 0, "sd_notify: 0 without NOTIFY_SOCKET");
    char dir[] = "/tmp/mtc-unit-notify-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a directory for the socket");
    char path[sizeof(dir) + 8];
    snprintf(path, sizeof(path), "%s/sock", dir);
    const char *names[] = {path, "@mtc-unit-notify-abstract"};
    for (int i = 0; i < 2; i++) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        size_t len = strlen(names[i]);
        memcpy(sa.sun_path, names[i], len);
        if (i == 1)
            sa.sun_path[0] = '\0';
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa,
                              (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) == 0,
              "listening on %s", names[i]);
        setenv("NOTIFY_SOCKET", names[i], 1);
        char buf[64] = {0};
        CHECK(mtc_sd_notify("READY=1\nSTATUS=up") == 1 &&
                  recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT) == 17 &&
                  strcmp(buf, "READY=1\nSTATUS=up") == 0,
              "sd_notify to %s: the state in one datagram", names[i]);
        close(fd);
    }
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    CHECK(mtc_sd_notify("READY=1") < 0 && errno == EINVAL, "sd_notify: a relative path refused");
    unsetenv("NOTIFY_SOCKET");
    unlink(path);
    rmdir(dir);
}

/* Which systemd service a process runs in, from its cgroup file's text. */
static void test_cgroup_service(void)
{
    char unit[64];
    CHECK(mtc_cgroup_service("0::/system.slice/mtcd.service\n", unit, sizeof(unit)) == 1 &&
              strcmp(unit, "mtcd.service") == 0,
          "cgroup v2: the service named");
    CHECK(mtc_cgroup_service("12:pids:/user.slice\n1:name=systemd:/system.slice/mtcd.service\n"
                             "0::/system.slice/mtcd.service",
                             unit, sizeof(unit)) == 1 &&
              strcmp(unit, "mtcd.service") == 0,
          "cgroup v1 lines: the service named");
    CHECK(mtc_cgroup_service("0::/user.slice/user-0.slice/session-1.scope\n", unit,
                             sizeof(unit)) == 0,
          "a login session: no service");
    CHECK(mtc_cgroup_service("0::/\n", unit, sizeof(unit)) == 0 &&
              mtc_cgroup_service("", unit, sizeof(unit)) == 0,
          "a container's root cgroup, or nothing: no service");
    CHECK(mtc_cgroup_service("0::/system.slice/a-very-long-name.service", unit, 8) == 0,
          "a name longer than the buffer: not cut");
}

static void test_wants_help(void)
{
    char *a[] = {"sub", "x", "-h"}, *b[] = {"sub", "--help"}, *c[] = {"sub", "--", "--help"},
         *d[] = {"sub", "--helpful", "-hx"}, *e[] = {"--help"};
    CHECK(mtc_wants_help(3, a) && mtc_wants_help(2, b), "-h or --help after the subcommand asks");
    CHECK(!mtc_wants_help(3, c), "not after --: those are the arguments' own");
    CHECK(!mtc_wants_help(3, d) && !mtc_wants_help(1, e),
          "only the exact words, and not argv[0] (the subcommand itself)");
}

static void test_json(void)
{
    json_t *o = json_pack("{s:s, s:i, s:[s, i, s]}", "name", "a", "n", 1, "list", "x", 2, "y");
    CHECK_STR(mtc_json_str(o, "name"), "a", "a key's string");
    CHECK(!mtc_json_str(o, "n") && !mtc_json_str(o, "none") && !mtc_json_str(NULL, "name"),
          "a number, a missing key, no object: NULL");
    CHECK_STR(mtc_json_str_or(o, "n", "-"), "-", "the default for a number");
    CHECK_STR(mtc_json_str_or(NULL, "name", ""), "", "and for no object");
    json_t *l = json_object_get(o, "list");
    CHECK(mtc_json_array_has(l, "x") && mtc_json_array_has(l, "y"), "an array's strings found");
    CHECK(!mtc_json_array_has(l, "X") && !mtc_json_array_has(l, "2") &&
              !mtc_json_array_has(NULL, "x") && !mtc_json_array_has(o, "name") &&
              !mtc_json_array_has(l, NULL),
          "exact match only; a number, no array, an object, no string: 0");
    json_decref(o);
}

int main(void)
{
    test_json();
    test_wants_help();
    test_cgroup_service();
    test_sd_notify();
    test_errprintf_one_line();
    test_users();
    test_open_as_user();
    test_proc_tree();
    test_duration();
    test_path_under();
    test_shell_quote();
    CHECK(mtc_name_valid("demo", 10), "plain name valid");
    CHECK(mtc_name_valid("a3m-pool-1", 20), "dashes and digits valid");
    CHECK(!mtc_name_valid("Demo", 10), "uppercase rejected");
    CHECK(!mtc_name_valid("1abc", 10), "leading digit rejected");
    CHECK(!mtc_name_valid("abc-", 10), "trailing dash rejected");
    CHECK(!mtc_name_valid("a/b", 10), "slash rejected");
    CHECK(!mtc_name_valid("", 10), "empty rejected");
    CHECK(!mtc_name_valid("abcdefghijk", 10), "too long rejected");

    char dir[] = "/tmp/mtc-unit-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof(path), "%s/a/b/c", dir);
    CHECK(mtc_mkdir_p(path, 0755) == 0, "mkdir -p");
    snprintf(path, sizeof(path), "%s/a/b/c/f.txt", dir);
    CHECK(mtc_write_file_fmt(path, 0600, "hello %d\n", 42) == 0, "atomic write");
    size_t len = 0;
    char *s = mtc_read_file(path, &len);
    CHECK_STR(s, "hello 42\n", "read back");
    CHECK(len == 9, "length");
    free(s);
    test_atomic_threads(dir);
    CHECK(mtc_rm_rf(dir) == 0 && !mtc_path_exists(dir), "rm -rf");

    char *out = NULL;
    char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    CHECK(mtc_run(argv, NULL, &out, 5000) == 3, "exit status returned");
    CHECK(out && strstr(out, "out") && strstr(out, "err"), "stdout and stderr captured");
    free(out);
    char *env[] = {"MTC_X=yes", NULL};
    char *argv2[] = {"sh", "-c", "printf %s \"$MTC_X\"", NULL};
    CHECK(mtc_run(argv2, env, &out, 5000) == 0, "env run");
    CHECK_STR(out, "yes", "extra env passed");
    free(out);
    char *argv3[] = {"sleep", "5", NULL};
    int64_t t0 = mtc_now_ms();
    CHECK(mtc_run(argv3, NULL, NULL, 200) == -1 && errno == ETIMEDOUT, "timeout kills");
    CHECK(mtc_now_ms() - t0 < 3000, "timeout is prompt");
    t0 = mtc_now_ms();
    CHECK(mtc_run(argv3, NULL, &out, 200) == -1 && errno == ETIMEDOUT,
          "timeout kills while output is captured");
    CHECK(mtc_now_ms() - t0 < 3000, "timeout with captured output is prompt (killed, not awaited)");
    free(out);

    /* mtc_run_io: stdin fed, stdout and stderr apart; a child that stops
     * reading early does not kill us with SIGPIPE */
    struct mtc_io io = {.in = "abc\n", .in_len = 4, .capture = MTC_IO_OUT | MTC_IO_ERR};
    char *argv5[] = {"sh", "-c", "tr a-z A-Z; echo oops >&2; exit 2", NULL};
    CHECK(mtc_run_io(argv5, NULL, &io, 5000) == 2, "run_io exit status");
    CHECK_STR(io.out, "ABC\n", "run_io stdin reached the child, stdout captured");
    CHECK_STR(io.err, "oops\n", "run_io stderr captured apart");
    free(io.out);
    free(io.err);
    size_t big = 4 << 20;
    char *data = calloc(1, big);
    struct mtc_io io2 = {.in = data, .in_len = big, .capture = MTC_IO_OUT};
    char *argv6[] = {"head", "-c", "10", NULL};
    CHECK(mtc_run_io(argv6, NULL, &io2, 5000) == 0, "child exiting before reading all stdin");
    CHECK(io2.out && strlen(io2.out) == 0, "its output captured (10 NUL bytes read as empty)");
    free(io2.out);
    struct mtc_io io3 = {.in = data, .in_len = big, .capture = MTC_IO_OUT};
    char *argv7[] = {"wc", "-c", NULL};
    CHECK(mtc_run_io(argv7, NULL, &io3, 10000) == 0 && io3.out && atol(io3.out) == (long)big,
          "4 MiB of stdin delivered whole");
    free(io3.out);
    free(data);
    /* err_line: each stderr line as it comes, the last one without a newline too */
    char lines[256] = "";
    struct mtc_io io4 = {.capture = MTC_IO_OUT | MTC_IO_ERR, .err_line = collect_line,
                         .err_line_arg = lines};
    char *argv8[] = {"sh", "-c", "echo one >&2; echo out; sleep 0.1; echo two >&2; printf three >&2",
                     NULL};
    CHECK(mtc_run_io(argv8, NULL, &io4, 5000) == 0 && !strcmp(lines, "one|two|three|") &&
              io4.err && !strcmp(io4.err, "one\ntwo\nthree") && !strcmp(io4.out, "out\n"),
          "stderr lines passed one by one, still captured whole (%s)", lines);
    free(io4.out);
    free(io4.err);

    char *argv4[] = {"sleep", "30", NULL};
    pid_t pid = mtc_spawn(argv4, NULL, NULL);
    CHECK(pid > 0 && mtc_pid_alive(pid), "spawned process alive");
    CHECK(mtc_pid_stop(pid, 2000) == 0 && !mtc_pid_alive(pid), "stopped by pid");

    char exe[4096], self[4200];
    CHECK(mtc_exe_dir(exe, sizeof(exe)) == 0 && exe[0] == '/', "program directory: %s", exe);
    snprintf(self, sizeof(self), "%s/test_common", exe);
    CHECK(mtc_path_exists(self), "this test lives there");
    CHECK(mtc_exe_dir(exe, 1) == -1, "no room: -1");

    char h[65];
    mtc_sha256_hex("abc", h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256");
    char r1[33], r2[33];
    CHECK(mtc_random_hex(r1, 16) == 0 && mtc_random_hex(r2, 16) == 0 && strcmp(r1, r2) != 0,
          "random hex differs");
    int port = mtc_free_port();
    CHECK(port >= 20000 && port < MTC_PORT_BASE, "free port in range");
    return check_done();
}
