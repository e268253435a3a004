/* opts: the pyxis options of a containerised step — the table srun shows,
 * parsing, checks, and the PYXIS_CONTAINER_* environment forms (the command
 * line wins over the environment). Pure: no Slurm, no mounts. */
#include "spank/container.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct container_optdef container_optdefs[] = {
    {"container-image", "PATH|[USER@][REGISTRY#]IMAGE[:TAG]",
     "[mtc] squashfs image to run the task in, or a registry image (pulled once, cached)", 0},
    {"container-mounts", "SRC:DST[:ro|rw][,SRC:DST...]",
     "[mtc] bind mount[s] inside the container; flags ro or rw (default rw)", 0},
    {"container-workdir", "PATH", "[mtc] working directory inside the container", 0},
    {"container-name", "NAME[:create|exec|no_exec]",
     "[mtc] name of a container that persists across the steps of the job", 0},
    {"container-env", "NAME[,NAME...]",
     "[mtc] variables whose job value overrides the image's value", 0},
    {"container-writable", NULL, "[mtc] make the container filesystem writable (the default)", 1},
    {"container-readonly", NULL, "[mtc] make the container filesystem read-only", 0},
    {"container-mount-home", NULL, "[mtc] bind mount the user's home directory (the default)", 1},
    {"no-container-mount-home", NULL, "[mtc] do not bind mount the user's home directory", 0},
    {"container-remap-root", NULL, "[mtc] be root inside the container (a user namespace)", 1},
    {"no-container-remap-root", NULL, "[mtc] do not remap to root inside the container", 0},
    {"container-save", "PATH",
     "[mtc] save the container's filesystem as a squashfs file when the step ends", 0},
    {"container-entrypoint", NULL, "[mtc] run the image's entrypoint before the task", 1},
    {"no-container-entrypoint", NULL, "[mtc] do not run the image's entrypoint (the default)", 0},
    {"container-entrypoint-log", NULL, "[mtc] print the output of the image's entrypoint", 1},
};
const size_t container_noptdefs = sizeof(container_optdefs) / sizeof(container_optdefs[0]);

int container_image_is_ref(const char *s)
{
    size_t n = strlen(s);
    if (strncmp(s, "docker://", 9) == 0)
        return 1;
    return !(s[0] == '/' || strncmp(s, "./", 2) == 0 || strncmp(s, "../", 3) == 0 ||
             (n > 5 && strcmp(s + n - 5, ".sqsh") == 0) ||
             (n > 9 && strcmp(s + n - 9, ".squashfs") == 0));
}

void container_opts_init(struct container_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->writable = o->mount_home = o->remap_root = o->entrypoint = o->entrypoint_log = -1;
}

int container_opts_active(const struct container_opts *o)
{
    return o->image[0] || o->name[0];
}

int container_path_normalize(const char *what, const char *in, char *out, size_t len,
                             mtc_error_t *err)
{
    if (!in || in[0] != '/')
        return errprintf(err, "%s: %.200s is not an absolute path", what, in ? in : "");
    if (mtc_path_clean(in, 0, out, len) < 0)
        return errprintf(err, errno == EINVAL ? "%s: %.200s leaves the container ('..')"
                                              : "%s: %.200s is too long",
                         what, in);
    return 0;
}

/* A host path made absolute against cwd, into out. */
static int host_path(const char *what, const char *in, const char *cwd, char *out, size_t len,
                     mtc_error_t *err)
{
    int n;
    if (in[0] == '/')
        n = snprintf(out, len, "%s", in);
    else if (!cwd)
        return errprintf(err, "%s: %.200s is not an absolute path", what, in);
    else
        n = snprintf(out, len, "%s/%s", cwd, in);
    if (n < 0 || (size_t)n >= len)
        return errprintf(err, "%s: %.200s is too long", what, in);
    return 0;
}

/* One SRC:DST[:FLAGS] entry. */
static int mount_entry(struct container_opts *o, char *entry, const char *cwd, mtc_error_t *err)
{
    if (o->nmounts == CONTAINER_MAX_MOUNTS)
        return errprintf(err, "--container-mounts: more than %d mounts", CONTAINER_MAX_MOUNTS);
    char *src = entry, *dst = strchr(entry, ':'), *flags = NULL;
    if (dst) {
        *dst++ = '\0';
        flags = strchr(dst, ':');
        if (flags)
            *flags++ = '\0';
    } else {
        dst = src; /* SRC alone: the same path inside */
    }
    if (!*src || !*dst)
        return errprintf(err, "--container-mounts: invalid entry '%.200s' (SRC:DST[:ro|rw])", entry);
    struct container_mount *m = &o->mounts[o->nmounts];
    if (host_path("--container-mounts", src, cwd, m->src, sizeof(m->src), err) < 0)
        return -1;
    if (dst[0] != '/')
        return errprintf(err, "--container-mounts: destination %.200s is not an absolute path",
                         dst);
    if (container_path_normalize("--container-mounts: destination", dst, m->dst, sizeof(m->dst),
                                 err) < 0)
        return -1;
    if (strcmp(m->dst, "/") == 0)
        return errprintf(err, "--container-mounts: cannot mount over the container's /");
    m->ro = 0;
    /* pyxis separates several flags with '+'; ro and rw are the ones that apply */
    for (char *f = flags, *next; f && *f; f = next) {
        next = strchr(f, '+');
        if (next)
            *next++ = '\0';
        if (strcmp(f, "ro") == 0)
            m->ro = 1;
        else if (strcmp(f, "rw") == 0)
            m->ro = 0;
        else if (strcmp(f, "rbind") != 0 && strcmp(f, "bind") != 0 && strcmp(f, "private") != 0 &&
                 strcmp(f, "rprivate") != 0)
            return errprintf(err, "--container-mounts: unknown flag '%.100s' (ro, rw)", f);
    }
    o->nmounts++;
    return 0;
}

int container_mounts_parse(struct container_opts *o, const char *spec, const char *cwd,
                           mtc_error_t *err)
{
    if (!spec || !*spec)
        return errprintf(err, "--container-mounts: argument required");
    char *copy = strdup(spec);
    if (!copy)
        return errprintf(err, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e && rc == 0; e = strtok_r(NULL, ",", &save))
        rc = mount_entry(o, e, cwd, err);
    if (rc == 0 && strstr(spec, ",,"))
        rc = errprintf(err, "--container-mounts: empty entry in '%.200s'", spec);
    free(copy);
    o->have_mounts = 1;
    return rc;
}

/* NAME[:FLAG]: the name is a short word (it becomes a directory on each node). */
static int name_set(struct container_opts *o, const char *arg, mtc_error_t *err)
{
    static const char *const modes[] = {"auto", "create", "exec", "no_exec"};
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (n == 0)
        return errprintf(err, "--container-name: empty name");
    if (n >= sizeof(o->name))
        return errprintf(err, "--container-name: name longer than %zu characters",
                         sizeof(o->name) - 1);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)arg[i]) && !strchr("._-", arg[i]))
            return errprintf(err, "--container-name: '%.*s' may hold only letters, digits, '.', "
                                  "'_' and '-'",
                             (int)n, arg);
    if (arg[0] == '.')
        return errprintf(err, "--container-name: '%.*s' may not start with '.'", (int)n, arg);
    const char *flag = colon && colon[1] ? colon + 1 : "auto";
    size_t m = 0;
    while (m < sizeof(modes) / sizeof(modes[0]) && strcmp(modes[m], flag) != 0)
        m++;
    if (m == sizeof(modes) / sizeof(modes[0]))
        return errprintf(err, "--container-name: unknown flag '%.50s' (create, exec or no_exec)",
                         flag);
    memcpy(o->name, arg, n);
    o->name[n] = '\0';
    o->name_mode = (enum container_name_mode)m;
    return 0;
}

static int env_set(struct container_opts *o, const char *arg, mtc_error_t *err)
{
    const char *p = arg;
    o->nenv = 0;
    o->have_env = 1;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof(o->env[0]))
            return errprintf(err, "--container-env: invalid name list '%.200s'", arg);
        for (size_t i = 0; i < n; i++)
            if (!(isalnum((unsigned char)p[i]) || p[i] == '_') || (i == 0 && isdigit((unsigned char)p[i])))
                return errprintf(err, "--container-env: '%.*s' is not a variable name", (int)n, p);
        if (o->nenv == CONTAINER_MAX_ENV)
            return errprintf(err, "--container-env: more than %d names", CONTAINER_MAX_ENV);
        memcpy(o->env[o->nenv], p, n);
        o->env[o->nenv++][n] = '\0';
        if (!p[n])
            return 0;
        p += n + 1;
    }
}

/* --container-save=PATH: a file on the node (made absolute against cwd),
 * opened as the user when the step starts; a name, never a directory. */
static int save_set(struct container_opts *o, const char *arg, const char *cwd, mtc_error_t *err)
{
    for (const char *p = arg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return errprintf(err, "--container-save: the path holds a control character");
    size_t n = strlen(arg);
    if (arg[n - 1] == '/' || strcmp(arg, ".") == 0 || strcmp(arg, "..") == 0 ||
        (n >= 3 && strcmp(arg + n - 3, "/..") == 0) || (n >= 2 && strcmp(arg + n - 2, "/.") == 0))
        return errprintf(err, "--container-save: %.200s names a directory, not a file", arg);
    return host_path("--container-save", arg, cwd, o->save, sizeof(o->save), err);
}

/* A tri-state flag: a second, different value is a conflict. */
static int flag_set(int *slot, int val, const char *name, mtc_error_t *err)
{
    if (*slot != -1 && *slot != val)
        return errprintf(err, "--%s conflicts with an earlier option", name);
    *slot = val;
    return 0;
}

int container_opt_set(struct container_opts *o, const char *name, const char *arg, const char *cwd,
                      mtc_error_t *err)
{
    const struct container_optdef *d = NULL;
    for (size_t i = 0; i < container_noptdefs && !d; i++)
        if (strcmp(container_optdefs[i].name, name) == 0)
            d = &container_optdefs[i];
    if (!d)
        return errprintf(err, "--%.100s: not a container option", name);
    if (d->arginfo && (!arg || !*arg))
        return errprintf(err, "--%s: argument required", name);
    if (strcmp(name, "container-image") == 0 && container_image_is_ref(arg)) {
        /* checked in full on the node (mtc image pull); what reaches a
         * command line must never hold a space, a control character or ".." */
        for (const char *p = arg; *p; p++)
            if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
                return errprintf(err, "--container-image: image %.200s: a space or control "
                                      "character in the reference",
                                 arg);
        if (strstr(arg, ".."))
            return errprintf(err, "--container-image: image %.200s: '..' in the reference", arg);
        if (strlen(arg) >= 512)
            return errprintf(err, "--container-image: image %.100s...: reference too long", arg);
        snprintf(o->image, sizeof(o->image), "%s", arg);
        o->image_ref = 1;
        return 0;
    }
    if (strcmp(name, "container-image") == 0) {
        o->image_ref = 0;
        if (host_path("--container-image", arg, cwd, o->image, sizeof(o->image), err) < 0)
            return -1;
        return 0;
    }
    if (strcmp(name, "container-mounts") == 0)
        return container_mounts_parse(o, arg, cwd, err);
    if (strcmp(name, "container-workdir") == 0) {
        /* inside the container after pivot_root: even ".." stays in it */
        int n = snprintf(o->workdir, sizeof(o->workdir), "%s%s", arg[0] == '/' ? "" : "/", arg);
        if (n < 0 || (size_t)n >= sizeof(o->workdir))
            return errprintf(err, "--container-workdir: %.200s is too long", arg);
        return 0;
    }
    if (strcmp(name, "container-name") == 0)
        return name_set(o, arg, err);
    if (strcmp(name, "container-env") == 0)
        return env_set(o, arg, err);
    if (strcmp(name, "container-save") == 0)
        return save_set(o, arg, cwd, err);
    if (strstr(name, "entrypoint-log"))
        return flag_set(&o->entrypoint_log, d->val, name, err);
    if (strstr(name, "entrypoint"))
        return flag_set(&o->entrypoint, d->val, name, err);
    if (strstr(name, "writable") || strstr(name, "readonly"))
        return flag_set(&o->writable, d->val, name, err);
    if (strstr(name, "mount-home"))
        return flag_set(&o->mount_home, d->val, name, err);
    return flag_set(&o->remap_root, d->val, name, err);
}

/* "1", "0", "true", "false", "yes", "no": 1/0, else -1. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = {"1", "true", "yes", "y", "on"};
    static const char *const no[] = {"0", "false", "no", "n", "off"};
    for (size_t i = 0; i < 5; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return 1;
        if (strcasecmp(s, no[i]) == 0)
            return 0;
    }
    return -1;
}

int container_opts_from_env(struct container_opts *o, const char *(*getenv_fn)(void *, const char *),
                            void *arg, const char *cwd, mtc_error_t *err)
{
    /* the value options: only when the command line did not give them */
    static const struct {
        const char *var, *opt;
    } vals[] = {{"PYXIS_CONTAINER_IMAGE", "container-image"},
                {"PYXIS_CONTAINER_MOUNTS", "container-mounts"},
                {"PYXIS_CONTAINER_WORKDIR", "container-workdir"},
                {"PYXIS_CONTAINER_NAME", "container-name"},
                {"PYXIS_CONTAINER_ENV", "container-env"},
                {"PYXIS_CONTAINER_SAVE", "container-save"}};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        const char *v = getenv_fn(arg, vals[i].var);
        if (!v || !*v)
            continue;
        int given = i == 0   ? o->image[0] != 0
                    : i == 1 ? o->have_mounts
                    : i == 2 ? o->workdir[0] != 0
                    : i == 3 ? o->name[0] != 0
                    : i == 4 ? o->have_env
                             : o->save[0] != 0;
        if (given)
            continue;
        mtc_error_t e;
        if (container_opt_set(o, vals[i].opt, v, cwd, &e) < 0)
            return errprintf(err, "%s: %s", vals[i].var, e.text);
    }
    /* the flags: VAR=1 means the positive form, 0 the negative */
    static const struct {
        const char *var;
        int invert;
    } flags[] = {{"PYXIS_CONTAINER_WRITABLE", 0},
                 {"PYXIS_CONTAINER_READONLY", 1},
                 {"PYXIS_CONTAINER_MOUNT_HOME", 0},
                 {"PYXIS_CONTAINER_REMAP_ROOT", 0},
                 {"PYXIS_CONTAINER_ENTRYPOINT", 0},
                 {"PYXIS_CONTAINER_ENTRYPOINT_LOG", 0}};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        const char *v = getenv_fn(arg, flags[i].var);
        if (!v || !*v)
            continue;
        int b = parse_bool(v);
        if (b < 0)
            return errprintf(err, "%s: '%.50s' is not 0 or 1", flags[i].var, v);
        int *slot = i < 2    ? &o->writable
                    : i == 2 ? &o->mount_home
                    : i == 3 ? &o->remap_root
                    : i == 4 ? &o->entrypoint
                             : &o->entrypoint_log;
        if (*slot == -1)
            *slot = flags[i].invert ? !b : b;
    }
    return 0;
}
