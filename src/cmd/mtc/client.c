/* client: the `mtc` command's HTTP client (libcurl) for mtcd's API, over the
 * unix socket by default or TCP with a bearer token (MTC_URL, MTC_TOKEN), and
 * what the subcommands share: dispatch, tables, operation waits, siblings. */
#include "cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct buf {
    char *data;
    size_t len;
    CURL *h;
    int fd;      /* >= 0: a 2xx reply's body goes here (cli_call_to_fd) */
    int to_fd;   /* the reply is a 2xx: writing to fd */
    int fd_error; /* errno of a failed write to fd */
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct buf *b = userdata;
    size_t n = size * nmemb;
    if (b->fd >= 0 && !b->len && !b->to_fd) {
        long status = 0;
        curl_easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
        b->to_fd = status >= 200 && status < 300;
    }
    if (b->to_fd) {
        if (mtc_write_all(b->fd, ptr, n) < 0) {
            b->fd_error = errno;
            return 0;
        }
        return n;
    }
    char *nd = realloc(b->data, b->len + n + 1);
    if (!nd)
        return 0;
    b->data = nd;
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* One request; a 2xx reply's body into fd when fd >= 0, else parsed into *out. */
static int call(struct cli *c, const char *method, const char *path, const json_t *body,
                json_t **out, int fd, long timeout_s, mtc_error_t *err)
{
    CURL *h = curl_easy_init();
    struct buf b = {NULL, 0, h, fd, 0, 0};
    struct curl_slist *hdrs = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    char url[8192], auth[512];
    long status = -1;
    *out = NULL;
    if (!h)
        return errprintf(err, "cannot initialise libcurl");
    if (c->url) {
        snprintf(url, sizeof(url), "%s%s", c->url, path);
        if (c->token) {
            snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
            hdrs = curl_slist_append(hdrs, auth);
        }
    } else {
        snprintf(url, sizeof(url), "http://localhost%s", path);
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->sock);
    }
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (c->ca_cert)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_cert);
    if (text)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        *out = b.data ? json_loads(b.data, 0, NULL) : NULL;
        if (!*out)
            *out = json_object();
    } else if (b.fd_error) {
        errprintf(err, "writing mtcd's reply: %s", strerror(b.fd_error));
    } else if (c->url) {
        errprintf(err, "cannot reach mtcd at %s: %s", c->url, curl_easy_strerror(rc));
    } else {
        errprintf(err, "mtcd is not running (no answer on %s); start it with `mtc daemon start`",
                  c->sock);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    free(text);
    free(b.data);
    return (int)status;
}

int cli_call(struct cli *c, const char *method, const char *path, const json_t *body, json_t **out,
             mtc_error_t *err)
{
    return call(c, method, path, body, out, -1, 60L, err);
}

int cli_call_to_fd(struct cli *c, const char *method, const char *path, int fd, mtc_error_t *err)
{
    json_t *out = NULL;
    int status = call(c, method, path, NULL, &out, fd, 3600L, err);
    if (status >= 200 && status < 300) {
        json_decref(out);
        return 0;
    }
    if (status >= 0) {
        const char *msg = json_string_value(json_object_get(json_object_get(out, "error"), "message"));
        errprintf(err, "%s", msg ? msg : "unexpected reply from mtcd");
    }
    json_decref(out);
    return -1;
}

int cli_call_ok(struct cli *c, const char *method, const char *path, const json_t *body,
                json_t **out, mtc_error_t *err)
{
    int status = cli_call(c, method, path, body, out, err);
    if (status < 0)
        return -1;
    if (status >= 200 && status < 300)
        return 0;
    const char *msg = json_string_value(json_object_get(json_object_get(*out, "error"), "message"));
    errprintf(err, "%s", msg ? msg : "unexpected reply from mtcd");
    json_decref(*out);
    *out = NULL;
    return -1;
}

json_t *cli_list_all(struct cli *c, const char *path, const char *key, mtc_error_t *err)
{
    json_t *all = json_array();
    char token[256] = "";
    do {
        char url[1024];
        if (snprintf(url, sizeof(url), "%s?pageSize=500%s%s", path, *token ? "&pageToken=" : "",
                     token) >= (int)sizeof(url)) {
            json_decref(all);
            return errprintf(err, "%s: path too long", path), NULL;
        }
        json_t *page = NULL;
        if (cli_call_ok(c, "GET", url, NULL, &page, err) < 0) {
            json_decref(all);
            return NULL;
        }
        json_array_extend(all, json_object_get(page, key));
        const char *next = json_string_value(json_object_get(page, "nextPageToken"));
        snprintf(token, sizeof(token), "%s", next ? next : "");
        json_decref(page);
    } while (*token);
    return all;
}

int cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mtc: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

void cli_print_json(const json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2));
    if (s)
        puts(s);
    free(s);
}

/* One line of a table: the headings (row NULL) or row's values. */
static void print_cells(const struct cli_col *cols, const json_t *row)
{
    for (const struct cli_col *k = cols; k->heading; k++) {
        const char *v = row ? json_string_value(json_object_get(row, k->key)) : k->heading;
        if (row && k->dflt && !(v && *v))
            v = k->dflt;
        printf("%s%-*s", k == cols ? "" : " ", k->width, v);
    }
    putchar('\n');
}

void cli_print_table(const struct cli_col *cols, const json_t *rows)
{
    size_t i;
    json_t *row;
    print_cells(cols, NULL);
    json_array_foreach(rows, i, row) print_cells(cols, row);
}

void cli_print_list(const struct cli *c, const json_t *all, const json_t *rows,
                    const struct cli_col *cols)
{
    if (c->json)
        cli_print_json(all);
    else
        cli_print_table(cols, rows);
}

int cli_json_only(struct cli *c, int argc, char **argv, const char *use)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") != 0)
            return cli_fail("usage: %s", use), 2;
        c->json = 1;
    }
    return 0;
}

void cli_age(const char *rfc3339, char *buf, size_t len)
{
    struct tm tm = {0};
    if (!rfc3339 || !strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, len, "-");
        return;
    }
    long s = (long)(time(NULL) - timegm(&tm));
    if (s < 0)
        s = 0;
    if (s < 120)
        snprintf(buf, len, "%lds", s);
    else if (s < 7200)
        snprintf(buf, len, "%ldm", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "%ldh", s / 3600);
    else
        snprintf(buf, len, "%ldd", s / 86400);
}

int cli_dispatch(struct cli *c, const char *group, const struct cli_cmd *table, int argc,
                 char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "--help") != 0 && strcmp(argv[0], "-h") != 0 &&
        strcmp(argv[0], "help") != 0) {
        for (const struct cli_cmd *t = table; t->name; t++) {
            if (strcmp(t->name, argv[0]) != 0)
                continue;
            if (t->use && mtc_wants_help(argc, argv)) {
                size_t n = strlen(t->use);
                printf("usage: %s%s", t->use, n && t->use[n - 1] == '\n' ? "" : "\n");
                return 0;
            }
            return t->run(c, argc, argv);
        }
        fprintf(stderr, "mtc: unknown command \"%s %s\"\n", group, argv[0]);
    }
    FILE *fp = argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
                             strcmp(argv[0], "help") == 0)
                   ? stdout
                   : stderr;
    fprintf(fp, "usage: %s COMMAND [ARGS]   (%s COMMAND --help for details)\n\ncommands:\n", group,
            group);
    for (const struct cli_cmd *t = table; t->name; t++)
        fprintf(fp, "  %-12s %s\n", t->name, t->summary);
    return fp == stdout ? 0 : 2;
}

int cli_sibling(const char *name, char *buf, size_t len)
{
    char dir[PATH_MAX];
    if (mtc_exe_dir(dir, sizeof(dir)) < 0)
        return -1;
    return snprintf(buf, len, "%s/%s", dir, name) < (int)len && access(buf, X_OK) == 0 ? 0 : -1;
}

void cli_op_path(struct cli *c, const char *name, char *buf, size_t len)
{
    if (strncmp(name, "projects/", 9) == 0)
        snprintf(buf, len, "/v1/%s", name);
    else
        snprintf(buf, len, "/v1/projects/%s/locations/%s/operations/%s", c->project, c->location,
                 name);
}

int cli_wait_op(struct cli *c, const char *name, int timeout_s, json_t **out, mtc_error_t *err)
{
    char path[512];
    cli_op_path(c, name, path, sizeof(path));
    int64_t deadline = timeout_s > 0 ? mtc_now_ms() + (int64_t)timeout_s * 1000 : 0;
    int delay = 100;
    for (;;) {
        json_t *op = NULL;
        if (cli_call_ok(c, "GET", path, NULL, &op, err) < 0)
            return -1;
        if (json_is_true(json_object_get(op, "done"))) {
            *out = op;
            return 0;
        }
        json_decref(op);
        if (deadline && mtc_now_ms() > deadline)
            return errprintf(err, "operation %s not done after %d s", name, timeout_s);
        mtc_sleep_ms(delay);
        if (delay < 1000)
            delay += 100;
    }
}
