/* cli: shared pieces of the `mtc` command — global options, the API client,
 * output helpers, and the subcommand handlers' signatures. */
#ifndef MTC_CLI_H
#define MTC_CLI_H

#include <jansson.h>

#include "common/common.h"

/* The packaged mtcd.service's home (its --home) and admin socket (--socket;
 * the home's mtcd.sock links to it). */
#define CLI_SYSTEM_HOME "/var/lib/mtc"
#define CLI_SYSTEM_SOCKET "/run/mtc/mtcd.sock"

struct cli {
    const char *home;     /* $MTC_HOME */
    const char *project;  /* default "local" */
    const char *location; /* default "local" */
    const char *url;      /* MTC_URL: http://HOST:PORT, else the unix socket */
    const char *token;    /* MTC_TOKEN for TCP */
    const char *ca_cert;  /* MTC_CA_CERT: PEM that signs mtcd's certificate (https://) */
    int json;             /* --json: print the API's JSON */
    char sock[4096];
};

/* One API call. body may be NULL. *out gets the parsed reply (caller decrefs).
 * Returns the HTTP status, or -1 when mtcd could not be reached (err says how to
 * start it). */
int cli_call(struct cli *c, const char *method, const char *path, const json_t *body, json_t **out,
             mtc_error_t *err);
/* Like cli_call but turns a non-2xx reply into -1 with the API's message in err. */
/* A request whose 2xx reply's body is written to fd (a backup): 0, or -1 +
 * err (mtcd's error message, or why it could not be reached or written). */
int cli_call_to_fd(struct cli *c, const char *method, const char *path, int fd, mtc_error_t *err);
int cli_call_ok(struct cli *c, const char *method, const char *path, const json_t *body,
                json_t **out, mtc_error_t *err);

/* Every item of a collection: GETs path?pageSize=500, following nextPageToken,
 * and returns the items under key of every page (a new array), or NULL with err. */
json_t *cli_list_all(struct cli *c, const char *path, const char *key, mtc_error_t *err);

/* Print msg as "mtc: msg" on stderr; returns 1 (the exit status). */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_print_json(const json_t *j);
/* One column of a table: its heading, the key of the row objects' string shown
 * under it, its width (0 for the last column: not padded), and what stands in
 * for a missing or empty value (NULL: the value as it is). */
struct cli_col {
    const char *heading, *key;
    int width;
    const char *dflt;
};
/* A heading line, then one line per object of rows. cols ends with a NULL heading. */
void cli_print_table(const struct cli_col *cols, const json_t *rows);
/* A listing: all as JSON with --json, else rows (within all) as a table. */
void cli_print_list(const struct cli *c, const json_t *all, const json_t *rows,
                    const struct cli_col *cols);
/* The arguments of a command whose only option is --json (sets c->json). 0, or 2
 * (the exit status) after printing "usage: USE". */
int cli_json_only(struct cli *c, int argc, char **argv, const char *use);
/* "3m", "2h", "5d" since an RFC 3339 time. */
void cli_age(const char *rfc3339, char *buf, size_t len);

/* One row of a subcommand table. use: what the subcommand takes (its usage
 * without "usage: ", one or more lines); cli_dispatch answers its --help or -h
 * with it. NULL for a group (its own table answers) and for a handler that
 * answers --help itself (login: the arguments of its COMMAND pass through). */
struct cli_cmd {
    const char *name;
    int (*run)(struct cli *c, int argc, char **argv);
    const char *summary;
    const char *use;
};
/* Run argv[0] from table, or print the table's help. group: "mtc cluster" etc.
 * A row's --help / -h prints "usage: USE" on stdout and returns 0 without
 * running it. */
int cli_dispatch(struct cli *c, const char *group, const struct cli_cmd *table, int argc,
                 char **argv);

int cmd_cluster(struct cli *c, int argc, char **argv);
int cmd_operations(struct cli *c, int argc, char **argv);
int cmd_env(struct cli *c, int argc, char **argv);
int cmd_login(struct cli *c, int argc, char **argv);
int cmd_token(struct cli *c, int argc, char **argv);
int cmd_daemon(struct cli *c, int argc, char **argv);
/* backup.c: `mtc daemon backup` and `mtc daemon restore` */
int cli_daemon_backup(struct cli *c, int argc, char **argv);
int cli_daemon_restore(struct cli *c, int argc, char **argv);
extern const char cli_backup_use[], cli_restore_use[];
/* recipes and experiments (run.c, experiment.c) */
int cmd_run(struct cli *c, int argc, char **argv);
int cmd_recipes(struct cli *c, int argc, char **argv);
int cmd_experiment(struct cli *c, int argc, char **argv);
int cmd_rl(struct cli *c, int argc, char **argv);
int cmd_attach(struct cli *c, int argc, char **argv);
/* container images (image.c) */
int cmd_image(struct cli *c, int argc, char **argv);
/* A registry reference pulled (as the caller) and imported into the squashfs
 * out: `mtc image import docker://…` and `enroot import`. arch NULL: this
 * machine's. 0, or -1 + err. */
int image_cli_pull(const char *ref, const char *out, const char *arch, mtc_error_t *err);
/* mtc run as `enroot` (a link named enroot): enroot.c. */
int cmd_enroot(int argc, char **argv);
/* datasets (data.c) */
int cmd_data(struct cli *c, int argc, char **argv);
/* accounts and users of a cluster's accounting (accounts.c) */
int cmd_accounts(struct cli *c, int argc, char **argv);
int cmd_users(struct cli *c, int argc, char **argv);
int cmd_qos(struct cli *c, int argc, char **argv);
/* the model registry (models.c) */
int cmd_models(struct cli *c, int argc, char **argv);
/* inference endpoints (endpoints.c) */
int cmd_endpoints(struct cli *c, int argc, char **argv);
/* mtc chaos: faults injected into a running job on purpose, and what they cost it (chaos.c). */
int cmd_chaos(struct cli *c, int argc, char **argv);
/* mtc healthscan: the cluster health scanner (healthscan.c). */
int cmd_healthscan(struct cli *c, int argc, char **argv);
/* mtc console: the web console's URL and a one-time login link (session.c). */
int cmd_console(struct cli *c, int argc, char **argv);
/* Where experiments live: the cluster's experiment root from `mtc env`
 * ($MTC_EXPERIMENT_ROOT, shared by every host of a cluster on hosts), else
 * $MTC_HOME (borrowed). */
const char *cli_experiments_home(const struct cli *c);

/* NAME next to this mtc binary (build/bin, PREFIX/bin) into buf, when it is
 * there and executable. 0, or -1. */
int cli_sibling(const char *name, char *buf, size_t len);
/* The API path of an operation, from its full name or its id, into buf. */
void cli_op_path(struct cli *c, const char *name, char *buf, size_t len);
/* Wait for an operation (full name or id) to finish; *out gets the final
 * operation JSON. timeout_s <= 0 waits forever. */
int cli_wait_op(struct cli *c, const char *name, int timeout_s, json_t **out, mtc_error_t *err);

#endif
