/* ssh: the hosts provider's transport — remote commands and files over the
 * system OpenSSH client, one multiplexed connection per host, mtc's own
 * known_hosts, a deadline per command, one-line errors. Internal to src/provider. */
#ifndef MTC_PROVIDER_SSH_H
#define MTC_PROVIDER_SSH_H

#include <sys/types.h>

#include "common/common.h"

/* Where and as whom. Strings are borrowed by ssh_create (it copies them). */
struct ssh_target {
    const char *host;      /* address or DNS name: [A-Za-z0-9.:_-], not starting with '-' */
    const char *user;      /* NULL: root */
    int port;              /* 0: 22 */
    const char *key_file;  /* private key (absolute path); NULL: ssh's default identities */
    int connect_timeout_s; /* 0: 10 — TCP connect + handshake, per new connection */
};

struct ssh_conn;

/* Flags for ssh_run and ssh_put. */
enum {
    /* the command (or file content) carries a secret: the log and error
     * messages show neither the command nor its stderr */
    SSH_SECRET = 1,
};

/* A connection handle for target. state_dir (created 0700 if missing; e.g.
 * $MTC_HOME/ssh) holds known_hosts, mtc's own, and the ControlMaster sockets
 * cm-<hash>-<key>. Nothing is sent yet: the first command opens the master.
 * Returns a handle the caller frees with ssh_destroy, or NULL + errno (EINVAL:
 * bad host, user or key path; ENAMETOOLONG: state_dir too long for a unix
 * socket path) and err. */
struct ssh_conn *ssh_create(const struct ssh_target *target, const char *state_dir,
                            mtc_error_t *err);
/* Closes the master connection (`ssh -O exit`) and frees. NULL is fine; errno kept. */
void ssh_destroy(struct ssh_conn *c);
/* Frees the handle and leaves the master running for the next handle to the
 * same host (it exits by itself after ControlPersist idle seconds). */
void ssh_free(struct ssh_conn *c);

/* The host as given and the known_hosts path (owned by c). */
const char *ssh_host(const struct ssh_conn *c);
const char *ssh_known_hosts(const struct ssh_conn *c);

/* Run command (a shell command line for the remote user's shell) on the host.
 * The remote side runs it under `timeout` with the same deadline, so a hung
 * command does not outlive the call even when the connection is lost.
 * out (optional) receives stdout, malloc'd, caller frees (set even on failure).
 * timeout_ms <= 0: 60 s. Returns the remote exit status (0..255; for non-zero
 * err says "host H: command exited with status N: <last stderr line>"), or -1
 * with errno and err for a transport failure:
 *   EHOSTUNREACH  no route / connect timed out / name unknown
 *   ECONNREFUSED  nothing listens on the ssh port
 *   EACCES        authentication refused (wrong key or user)
 *   EKEYREJECTED  the host key changed (err names the known_hosts line to remove)
 *   ETIMEDOUT     the command ran past timeout_ms (it was killed)
 *   ECONNRESET    the connection broke
 * Every call is logged (LOG_INFO): host, command (or "[secret]"), result, duration. */
int ssh_run(struct ssh_conn *c, const char *command, char **out, int timeout_ms, int flags,
            mtc_error_t *err);
/* ssh_run with in_len bytes of in (borrowed) on the command's stdin: a script
 * for `sh -s`, an archive for `tar -x`. The bytes are never logged; with
 * SSH_SECRET the command is not either. */
int ssh_run_in(struct ssh_conn *c, const char *command, const void *in, size_t in_len, char **out,
               int timeout_ms, int flags, mtc_error_t *err);

/* Write len bytes of data to remote_path (absolute, [A-Za-z0-9._/+@-]) atomically:
 * a temp file in the same directory (created 0600, so the content is never
 * readable by others while it lands), fsync, chmod mode, rename. Parent
 * directories are created 0755. The content travels on ssh's stdin, never on a
 * command line, and is never logged. 0, or -1 + errno/err as ssh_run (a remote
 * failure gives EIO). */
int ssh_put(struct ssh_conn *c, const void *data, size_t len, const char *remote_path, mode_t mode,
            int flags, mtc_error_t *err);
/* ssh_put with the content of local_path. */
int ssh_put_file(struct ssh_conn *c, const char *local_path, const char *remote_path, mode_t mode,
                 int flags, mtc_error_t *err);

/* 1 when the master connection is up (`ssh -O check`), else 0. */
int ssh_master_alive(struct ssh_conn *c);

#endif
