/* head_acct: a cluster's accounting (orchestratorSpec.slurmSpec.accounting,
 * issue 31) — slurmdbd on the controller with MariaDB as its storage: a
 * private instance under the cluster's directory (db/: its datadir, socket,
 * a loopback port; made once with mariadb-install-db) or an external server
 * the spec names (its user and password from a root-only file), the
 * database and its user, slurmdbd.conf (0600), both daemons found by pid
 * file, started in that order before slurmctld and started again by the
 * supervisor, the cluster registered with sacctmgr. db/acct.json keeps the
 * ports and the private instance's password (0600). A backup of mtcd holds
 * the private database as a dump (db/dump.sql, head_acct_dump), loaded when
 * a restored home makes the datadir again. */
#include "provider/head.h"

#include "common/common.h"
#include "slurm/slurm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACCT_DB "slurm_acct_db"
#define ACCT_USER "slurm"
#define ACCT_WAIT_MS 60000
/* a small private instance: slurmdbd's tables, not a site's database */
#define INNODB_SMALL                                                                               \
    "--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M",                                  \
        "--innodb-data-file-path=ibdata1:8M:autoextend", "--innodb-lock-wait-timeout=900"

/* What db/acct.json says. */
struct acct {
    int enabled, external;
    int db_port, dbd_port;
    char host[256], user[64], pass[128];
    char cred[PLEN]; /* an external database's credentials file (read at each start) */
};

static const char *spec_acct_str(const json_t *spec, const char *k)
{
    const json_t *a = json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "accounting");
    return json_string_value(json_object_get(a, k));
}

static const json_t *spec_acct(const json_t *spec)
{
    return json_object_get(
        json_object_get(json_object_get(spec, "orchestratorSpec"), "slurmSpec"), "accounting");
}

static int acct_load(const struct head *h, struct acct *a)
{
    char path[PLEN];
    memset(a, 0, sizeof(*a));
    json_t *j = json_load_file(head_path(h, path, "db/acct.json"), 0, NULL);
    if (!j)
        return -1;
    a->enabled = json_is_true(json_object_get(j, "enabled"));
    a->external = json_is_true(json_object_get(j, "external"));
    a->db_port = (int)json_integer_value(json_object_get(j, "dbPort"));
    a->dbd_port = (int)json_integer_value(json_object_get(j, "dbdPort"));
    snprintf(a->host, sizeof(a->host), "%s", mtc_json_str_or(j, "host", ""));
    snprintf(a->user, sizeof(a->user), "%s", mtc_json_str_or(j, "user", ""));
    snprintf(a->pass, sizeof(a->pass), "%s", mtc_json_str_or(j, "password", ""));
    snprintf(a->cred, sizeof(a->cred), "%s", mtc_json_str_or(j, "credentialsFile", ""));
    json_decref(j);
    return 0;
}

/* An external database's user and password: a root-owned file no one else
 * may read, "user=NAME" and "password=SECRET" lines. 0/-1 + err. */
static int read_credentials(const char *path, struct acct *a, mtc_error_t *err)
{
    struct stat sb;
    if (stat(path, &sb) < 0)
        return errprintf(err, "accounting.database.credentialsFile %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode) || sb.st_uid != 0 || (sb.st_mode & 077))
        return errprintf(err,
                         "accounting.database.credentialsFile %s: must be a root-owned file "
                         "that no one else may read (mode 0600)",
                         path);
    size_t len;
    char *text = mtc_read_file(path, &len);
    if (!text)
        return errprintf(err, "accounting.database.credentialsFile %s: %s", path, strerror(errno));
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "user=", 5) == 0)
            snprintf(a->user, sizeof(a->user), "%s", line + 5);
        else if (strncmp(line, "password=", 9) == 0)
            snprintf(a->pass, sizeof(a->pass), "%s", line + 9);
    }
    free(text);
    if (!*a->user || !*a->pass || strpbrk(a->user, "'\"\\ \t") || strpbrk(a->pass, "\"\\\n"))
        return errprintf(err,
                         "accounting.database.credentialsFile %s: needs a user= and a password= "
                         "line (no quotes, backslashes or spaces in the user)",
                         path);
    return 0;
}

int head_acct_setup(const struct head *h, const json_t *spec, const char *addr,
                    struct slurm_accounting *out, mtc_error_t *err)
{
    const json_t *sa = spec_acct(spec);
    struct acct a, had;
    int have = acct_load(h, &had) == 0;
    memset(out, 0, sizeof(*out));
    a = had;
    a.enabled = json_is_true(json_object_get(sa, "enabled"));
    if (!a.enabled && !have)
        return 0;
    const json_t *db = json_object_get(sa, "database");
    a.external = db != NULL;
    if (a.external) { /* its password stays in its file: read here and at each start */
        snprintf(a.host, sizeof(a.host), "%s", json_string_value(json_object_get(db, "host")));
        a.db_port = (int)json_integer_value(json_object_get(db, "port"));
        snprintf(a.cred, sizeof(a.cred), "%s",
                 json_string_value(json_object_get(db, "credentialsFile")));
        if (a.enabled && read_credentials(a.cred, &a, err) < 0)
            return -1;
    } else if (!have || had.external) { /* a private instance: made on first use */
        a.cred[0] = '\0';
        snprintf(a.host, sizeof(a.host), "127.0.0.1");
        snprintf(a.user, sizeof(a.user), ACCT_USER);
        if (mtc_random_hex(a.pass, 24) < 0 || !(a.db_port = mtc_free_port()))
            return errprintf(err, "accounting: no free port or randomness for the database");
    }
    if (!a.dbd_port && !(a.dbd_port = mtc_free_port()))
        return errprintf(err, "accounting: no free port for slurmdbd");
    char path[PLEN];
    if (mtc_mkdir_p(head_path(h, path, "db"), 0700) < 0)
        return errprintf(err, "mkdir %s: %s", path, strerror(errno));
    /* a running slurmctld learns of accounting turned on or off only at start
     * (had is all zero for a cluster that never had it) */
    if (had.enabled != a.enabled &&
        mtc_write_file_fmt(head_path(h, path, "db/ctld-restart"), 0600, "1\n") < 0)
        return errprintf(err, "cannot write %s: %s", path, strerror(errno));
    json_t *j = json_pack("{s:b, s:b, s:s, s:i, s:i, s:s, s:s, s:s}", "enabled", a.enabled,
                          "external", a.external, "host", a.host, "dbPort", a.db_port, "dbdPort",
                          a.dbd_port, "user", a.user, "password", a.external ? "" : a.pass,
                          "credentialsFile", a.cred);
    if (head_json_save(head_path(h, path, "db/acct.json"), j, 0600, err) < 0)
        return -1;
    if (a.enabled) {
        out->port = a.dbd_port;
        out->host = addr ? addr : "127.0.0.1";
        out->enforce = spec_acct_str(spec, "accountingStorageEnforce");
    }
    return 0;
}

int head_acct_enabled(const struct head *h)
{
    struct acct a;
    return acct_load(h, &a) == 0 && a.enabled;
}

static void db_paths(const struct head *h, char *datadir, char *sock)
{
    head_path(h, datadir, "db/data");
    head_path(h, sock, "db/mariadb.sock");
}

static pid_t mariadb_running(const struct head *h)
{
    char a[PLEN + 16], d[PLEN], s[PLEN];
    db_paths(h, d, s);
    snprintf(a, sizeof(a), "--datadir=%s", d);
    return head_running(h, "mariadbd", "db/mariadbd.pid", a, NULL);
}

/* slurmdbd's command line names nothing of the cluster: its environment
 * (SLURM_CONF, how it finds slurmdbd.conf) does. */
static pid_t dbd_running(const struct head *h)
{
    char env[PLEN + 16];
    snprintf(env, sizeof(env), "SLURM_CONF=%s", h->conf);
    pid_t pid = head_running(h, "slurmdbd", "run/slurm/slurmdbd.pid", "slurmdbd", NULL);
    return pid > 0 && mtc_proc_has(pid, "environ", env, NULL) ? pid : 0;
}

static int dump_load(const struct head *h, const char *sock, mtc_error_t *err);

/* The private instance: its datadir made once, mariadbd started, the
 * database and slurmdbd's user made (idempotent). 0/-1 + err. */
static int mariadb_start(const struct head *h, const struct acct *a, mtc_error_t *err)
{
    char d[PLEN], s[PLEN], log[PLEN], out_log[PLEN], pidf[PLEN];
    char a_dir[PLEN + 16], a_sock[PLEN + 16], a_port[32], a_pid[PLEN + 16], a_log[PLEN + 16];
    db_paths(h, d, s);
    snprintf(a_dir, sizeof(a_dir), "--datadir=%s", d);
    snprintf(a_sock, sizeof(a_sock), "--socket=%s", s);
    snprintf(a_port, sizeof(a_port), "--port=%d", a->db_port);
    snprintf(a_pid, sizeof(a_pid), "--pid-file=%s", head_path(h, pidf, "db/mariadbd.pid"));
    snprintf(a_log, sizeof(a_log), "--log-error=%s", head_path(h, log, "log/mariadbd.log"));
    int fresh = !mtc_path_exists(d);
    if (fresh) {
        char *init[] = {"mariadb-install-db", "--no-defaults", a_dir, "--user=root",
                        "--auth-root-authentication-method=socket", "--skip-test-db",
                        INNODB_SMALL, NULL};
        char *out = NULL;
        int rc = mtc_run(init, NULL, &out, 120000);
        if (rc != 0) {
            errprintf(err, "mariadb-install-db failed (%d): %.200s", rc, out ? out : "");
            free(out);
            mtc_rm_rf(d);
            return -1;
        }
        free(out);
    }
    unlink(s);
    char *argv[] = {"mariadbd", "--no-defaults", a_dir, "--user=root", a_sock, a_port,
                    "--bind-address=127.0.0.1", a_pid, a_log, "--skip-name-resolve",
                    "--performance-schema=OFF", INNODB_SMALL, NULL};
    pid_t pid = mtc_spawn(argv, NULL, head_path(h, out_log, "log/mariadbd.out"));
    if (pid < 0)
        return errprintf(err, "cannot start mariadbd: %s", strerror(errno));
    head_record_pid(h, "mariadbd", pid);
    char sql[512];
    snprintf(sql, sizeof(sql),
             "CREATE DATABASE IF NOT EXISTS " ACCT_DB "; CREATE USER IF NOT EXISTS '" ACCT_USER
             "'@'127.0.0.1' IDENTIFIED BY '%s'; ALTER USER '" ACCT_USER
             "'@'127.0.0.1' IDENTIFIED BY '%s'; GRANT ALL ON " ACCT_DB ".* TO '" ACCT_USER
             "'@'127.0.0.1';",
             a->pass, a->pass);
    char *q[] = {"mariadb", "--no-defaults", a_sock, "-u", "root", "-e", sql, NULL};
    for (int64_t end = mtc_now_ms() + ACCT_WAIT_MS; mtc_now_ms() < end; mtc_sleep_ms(200)) {
        if (!mtc_pid_alive(pid))
            return errprintf(err, "mariadbd exited at start (see %s)", log);
        if (mtc_path_exists(s) && mtc_run(q, NULL, NULL, 10000) == 0)
            return fresh ? dump_load(h, s, err) : 0;
    }
    return errprintf(err, "mariadbd did not answer within %d s (see %s)", ACCT_WAIT_MS / 1000, log);
}

/* A datadir just made where db/dump.sql is: a home restored from a backup
 * (which holds the dump, never the datadir's files): the records loaded. */
static int dump_load(const struct head *h, const char *sock, mtc_error_t *err)
{
    char dump[PLEN], a_sock[PLEN + 16];
    if (!mtc_path_exists(head_path(h, dump, "db/dump.sql")))
        return 0;
    snprintf(a_sock, sizeof(a_sock), "--socket=%s", sock);
    char *argv[] = {"sh", "-c", "exec mariadb --no-defaults \"$1\" -u root <\"$2\"", "sh",
                    a_sock, dump, NULL};
    char *out = NULL;
    int rc = mtc_run(argv, NULL, &out, 600000);
    if (rc != 0)
        errprintf(err, "loading the accounting records from %s failed: %.200s", dump,
                  out ? out : "");
    else
        log_msg(LOG_NOTICE, "cluster %s: accounting records loaded from %s", h->id, dump);
    free(out);
    return rc == 0 ? 0 : -1;
}

int head_acct_dump(const struct head *h, mtc_error_t *err)
{
    struct acct a;
    if (acct_load(h, &a) < 0 || !a.enabled || a.external || !mariadb_running(h))
        return 0; /* an external database is its site's to back up */
    char d[PLEN], s[PLEN], dump[PLEN], tmp[PLEN + 8], a_sock[PLEN + 16];
    db_paths(h, d, s);
    head_path(h, dump, "db/dump.sql");
    snprintf(tmp, sizeof(tmp), "%s.new", dump);
    snprintf(a_sock, sizeof(a_sock), "--socket=%s", s);
    /* one transaction: a consistent copy while slurmdbd writes on; 0600,
     * as the datadir's files */
    char *argv[] = {"sh", "-c",
                    "umask 077; exec mariadb-dump --no-defaults \"$1\" -u root "
                    "--single-transaction --databases " ACCT_DB " >\"$2\"",
                    "sh", a_sock, tmp, NULL};
    char *out = NULL;
    int rc = mtc_run(argv, NULL, &out, 600000);
    if (rc != 0 || rename(tmp, dump) < 0) {
        errprintf(err, "cluster %s: mariadb-dump failed: %.200s", h->id,
                  rc ? (out ? out : "") : strerror(errno));
        unlink(tmp);
        free(out);
        return -1;
    }
    free(out);
    return 0;
}

static int write_dbd_conf(const struct head *h, const struct acct *a, mtc_error_t *err)
{
    char path[PLEN], run[PLEN], log[PLEN];
    head_path(h, run, "run/slurm/slurmdbd.pid");
    head_path(h, log, "log/slurmdbd.log");
    char *text = NULL;
    if (asprintf(&text,
                 "# slurmdbd.conf for mtc cluster %s — generated by mtc; edits are overwritten\n"
                 "AuthType=auth/munge\nAuthInfo=socket=%s\n"
                 "DbdHost=localhost\nDbdPort=%d\nSlurmUser=root\n"
                 "PidFile=%s\nLogFile=%s\nDebugLevel=info\n"
                 "StorageType=accounting_storage/mysql\nStorageHost=%s\nStoragePort=%d\n"
                 "StorageLoc=" ACCT_DB "\nStorageUser=%s\nStoragePass=%s\n",
                 h->id, h->munge_socket, a->dbd_port, run, log, a->host, a->db_port, a->user,
                 a->pass) < 0)
        return errprintf(err, "out of memory");
    /* 0600: it holds the database's password */
    int rc = mtc_write_file_atomic(head_path(h, path, "slurmdbd.conf"), text, strlen(text), 0600);
    free(text);
    return rc < 0 ? errprintf(err, "cannot write %s: %s", path, strerror(errno)) : 0;
}

/* sacctmgr on the cluster's slurm.conf; its output into out (may be NULL). */
static int sacctmgr(const struct head *h, char *const args[], char **out)
{
    char *argv[16] = {"sacctmgr", "-i", "-n"};
    int n = 3;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    char env[PLEN + 16];
    snprintf(env, sizeof(env), "SLURM_CONF=%s", h->conf);
    char *envp[] = {env, NULL};
    return mtc_run(argv, envp, out, 15000);
}

static int dbd_start(const struct head *h, mtc_error_t *err)
{
    char log[PLEN], env[PLEN + 16];
    snprintf(env, sizeof(env), "SLURM_CONF=%s", h->conf);
    char *envp[] = {env, NULL};
    char *argv[] = {"slurmdbd", "-D", NULL};
    pid_t pid = mtc_spawn(argv, envp, head_path(h, log, "log/slurmdbd.out"));
    if (pid < 0)
        return errprintf(err, "cannot start slurmdbd: %s", strerror(errno));
    head_record_pid(h, "slurmdbd", pid);
    char *show[] = {"show", "cluster", "format=cluster", NULL};
    for (int64_t end = mtc_now_ms() + ACCT_WAIT_MS; mtc_now_ms() < end; mtc_sleep_ms(200)) {
        if (!mtc_pid_alive(pid))
            return errprintf(err, "slurmdbd exited at start (see %s/log/slurmdbd.log)", h->dir);
        if (sacctmgr(h, show, NULL) == 0)
            return 0;
    }
    return errprintf(err, "slurmdbd did not answer within %d s (see %s/log/slurmdbd.log)",
                     ACCT_WAIT_MS / 1000, h->dir);
}

/* The cluster in the database (slurmctld registers to a cluster that exists). */
static int register_cluster(const struct head *h, mtc_error_t *err)
{
    char *out = NULL;
    char *show[] = {"show", "cluster", "format=cluster", NULL};
    int rc = sacctmgr(h, show, &out);
    int known = rc == 0 && out && strstr(out, h->id);
    free(out);
    if (known)
        return 0;
    char *add[] = {"add", "cluster", (char *)h->id, NULL};
    if (sacctmgr(h, add, NULL) != 0)
        return errprintf(err, "sacctmgr add cluster %s failed (see %s/log/slurmdbd.log)", h->id,
                         h->dir);
    return 0;
}

int head_acct_start(const struct head *h, provider_progress_fn progress, void *arg,
                    mtc_error_t *err)
{
    struct acct a;
    if (acct_load(h, &a) < 0 || !a.enabled) {
        head_acct_stop(h); /* turned off: the daemons go, the data stays */
        return 0;
    }
    if (!a.external && !mariadb_running(h)) {
        head_say(progress, arg, "starting the accounting database (MariaDB)");
        if (mariadb_start(h, &a, err) < 0)
            return -1;
    }
    if (a.external && read_credentials(a.cred, &a, err) < 0)
        return -1;
    if (write_dbd_conf(h, &a, err) < 0)
        return -1;
    if (!dbd_running(h)) {
        head_say(progress, arg, "starting slurmdbd");
        if (dbd_start(h, err) < 0)
            return -1;
    }
    return register_cluster(h, err);
}

int head_acct_supervise(const struct head *h, provider_event_fn ev, void *arg, mtc_error_t *err)
{
    struct acct a;
    if (acct_load(h, &a) < 0 || !a.enabled)
        return 0;
    if (!a.external && !mariadb_running(h)) {
        if (mariadb_start(h, &a, err) < 0)
            return -1;
        if (ev)
            ev(arg, "MARIADB_RESTART", NULL,
               "the accounting database (mariadbd) was not running; restarted");
    }
    if (!dbd_running(h)) {
        if (dbd_start(h, err) < 0)
            return -1;
        if (ev)
            ev(arg, "SLURMDBD_RESTART", NULL,
               "slurmdbd was not running; restarted (slurmctld sends what it kept meanwhile)");
    }
    return 0;
}

void head_acct_stop(const struct head *h)
{
    head_stop_pidfile(h, "slurmdbd", dbd_running(h));
    head_stop_pidfile(h, "mariadbd", mariadb_running(h));
}
