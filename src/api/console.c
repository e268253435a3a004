/* console: static files, login/logout and cookie sessions of the web console
 * (console.h). Sessions and one-time login codes are kept in memory, in two
 * small tables under one mutex; a restart of mtcd logs everyone out. */
#include "api/console.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SESSION_TTL_MS (8LL * 3600 * 1000)
#define CODE_TTL_MS (5LL * 60 * 1000)
#define MAX_SESSIONS 256
#define MAX_CODES 16
#define COOKIE "mtc_session"
#define ID_HEX 64 /* 32 random bytes */

struct session {
    char id[ID_HEX + 1]; /* "" when free */
    enum api_role role;
    int64_t expires_ms;
    char token_hash[65]; /* the token it was made from ("": a one-time link) */
};
static struct session sessions[MAX_SESSIONS], codes[MAX_CODES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The fixed set of files the console serves: URL → file (under the data
 * directory's www/, or an absolute path) and its type. Nothing else is read. */
static const struct {
    const char *url, *file, *type;
} files[] = {
    {"/console/app.js", "www/app.js", "text/javascript; charset=utf-8"},
    {"/console/login.js", "www/login.js", "text/javascript; charset=utf-8"},
    {"/console/style.css", "www/style.css", "text/css; charset=utf-8"},
    {"/console/architectures.json", "www/architectures.json", "application/json"},
    /* Debian's libjs-chart.js (Chart.js 3, UMD build) */
    {"/console/chart.js", "/usr/share/javascript/chart.js/chart.min.js",
     "text/javascript; charset=utf-8"},
};

static const char CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                          "base-uri 'none'; frame-ancestors 'none'";

/* Put a new entry with a fresh random id into table (the first free or
 * expired slot, else the one expiring soonest). Caller holds lock. */
static void table_add(struct session *table, size_t n, enum api_role role, int64_t ttl,
                      const char *token_hash, char id[ID_HEX + 1])
{
    int64_t now = mtc_now_ms();
    size_t pick = 0;
    for (size_t i = 0; i < n; i++) {
        if (!table[i].id[0] || table[i].expires_ms <= now) {
            pick = i;
            break;
        }
        if (table[i].expires_ms < table[pick].expires_ms)
            pick = i;
    }
    mtc_random_hex(table[pick].id, ID_HEX / 2);
    table[pick].role = role;
    table[pick].expires_ms = now + ttl;
    snprintf(table[pick].token_hash, sizeof(table[pick].token_hash), "%s", token_hash);
    memcpy(id, table[pick].id, ID_HEX + 1);
}

/* The live entry with this id (its role, and its token's hash into hash
 * when not NULL), ROLE_NONE if none; take: remove it. */
static enum api_role table_find_hash(struct session *table, size_t n, const char *id, int take,
                                     char hash[65])
{
    if (!id || strlen(id) != ID_HEX)
        return ROLE_NONE;
    enum api_role role = ROLE_NONE;
    int64_t now = mtc_now_ms();
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++) {
        if (!table[i].id[0])
            continue;
        /* constant time over the id */
        unsigned diff = 0;
        for (size_t k = 0; k < ID_HEX; k++)
            diff |= (unsigned)(table[i].id[k] ^ id[k]);
        if (diff)
            continue;
        if (table[i].expires_ms > now) {
            role = table[i].role;
            if (hash)
                memcpy(hash, table[i].token_hash, 65);
        }
        if (take || table[i].expires_ms <= now)
            table[i].id[0] = '\0';
        break;
    }
    pthread_mutex_unlock(&lock);
    return role;
}

static enum api_role table_find(struct session *table, size_t n, const char *id, int take)
{
    return table_find_hash(table, n, id, take, NULL);
}

/* A session's role now: a session made from a token lasts only while the
 * token does (revoking it logs its sessions out). */
static enum api_role session_role(struct store *st, const char *id)
{
    char hash[65] = "";
    enum api_role role = table_find_hash(sessions, MAX_SESSIONS, id, 0, hash);
    struct store_principal p;
    if (role != ROLE_NONE && hash[0] && store_token_lookup(st, hash, &p) < 0) {
        table_find(sessions, MAX_SESSIONS, id, 1);
        return ROLE_NONE;
    }
    return role;
}

int api_console_owns(const char *url)
{
    return strcmp(url, "/") == 0 || strncmp(url, "/console/", 9) == 0;
}

static const char *session_id(struct MHD_Connection *conn)
{
    return MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, COOKIE);
}

static int state_changing(const char *method)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0;
}

static int has_csrf(struct MHD_Connection *conn)
{
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, API_CONSOLE_CSRF_HEADER);
    return h && strcmp(h, "1") == 0;
}

int api_console_principal(struct MHD_Connection *conn, struct store *st, const char *method,
                          struct api_principal *who, const char **why)
{
    const char *id = session_id(conn);
    if (!id)
        return 0;
    enum api_role role = session_role(st, id);
    if (role == ROLE_NONE) {
        *why = "console session unknown or expired: log in again";
        return -1;
    }
    if (state_changing(method) && !has_csrf(conn)) {
        *why =
            "a console request that changes state needs the " API_CONSOLE_CSRF_HEADER ": 1 header";
        return -1;
    }
    memset(who, 0, sizeof(*who));
    who->role = role;
    return 1;
}

static void security_headers(struct MHD_Response *resp, const char *type)
{
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Content-Security-Policy", CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
}

static enum MHD_Result respond(struct MHD_Connection *conn, int status, const char *type,
                               char *body, size_t len, const char *cookie, const char *location)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, body ? body : "", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    security_headers(resp, type);
    if (cookie)
        MHD_add_response_header(resp, "Set-Cookie", cookie);
    if (location)
        MHD_add_response_header(resp, "Location", location);
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, int status, json_t *body,
                                 const char *cookie)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return respond(conn, status, "application/json", text, text ? strlen(text) : 0, cookie, NULL);
}

static enum MHD_Result send_error(struct MHD_Connection *conn, int status, const char *msg)
{
    struct api_resp out = {0};
    api_error(&out, status, "%s", msg);
    return send_json(conn, status, out.body, NULL);
}

static enum MHD_Result send_file(struct MHD_Connection *conn, const char *file, const char *type)
{
    char *path = file[0] == '/' ? strdup(file) : mtc_data_path(file);
    size_t len = 0;
    char *body = path ? mtc_read_file(path, &len) : NULL;
    free(path);
    if (!body)
        return send_error(conn, 404, "console file not installed (share/mtc/www, libjs-chart.js)");
    return respond(conn, 200, type, body, len, NULL, NULL);
}

static void cookie_for(char *buf, size_t len, const char *id, int tls)
{
    snprintf(buf, len, COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%lld%s", id,
             id[0] ? SESSION_TTL_MS / 1000 : 0LL, tls ? "; Secure" : "");
}

/* POST /console/login with Authorization: Bearer TOKEN and the CSRF header. */
static enum MHD_Result login_token(struct MHD_Connection *conn, struct store *st, int tls)
{
    if (!has_csrf(conn))
        return send_error(conn, 403,
                          "console login needs the " API_CONSOLE_CSRF_HEADER ": 1 header");
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return send_error(conn, 401, "missing or invalid bearer token");
    char hash[65];
    struct store_principal p;
    mtc_sha256_hex(auth + 7, hash);
    enum api_role role = ROLE_NONE;
    if (store_token_lookup(st, hash, &p) == 0)
        role = api_role_parse(p.role);
    if (role < ROLE_VIEWER) /* node tokens speak for a node, not a person */
        return send_error(conn, 401, "missing or invalid bearer token");
    char id[ID_HEX + 1], cookie[256];
    pthread_mutex_lock(&lock);
    table_add(sessions, MAX_SESSIONS, role, SESSION_TTL_MS, hash, id);
    pthread_mutex_unlock(&lock);
    cookie_for(cookie, sizeof(cookie), id, tls);
    return send_json(conn, 200, json_pack("{s:s}", "role", api_role_name(role)), cookie);
}

/* GET /console/login?code=CODE: a one-time link → a session, then "/". */
static enum MHD_Result login_code(struct MHD_Connection *conn, int tls)
{
    const char *code = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "code");
    enum api_role role = table_find(codes, MAX_CODES, code, 1);
    if (role == ROLE_NONE)
        return send_error(conn, 401,
                          "login link unknown, used or expired: run `mtc console` again");
    char id[ID_HEX + 1], cookie[256];
    pthread_mutex_lock(&lock);
    table_add(sessions, MAX_SESSIONS, role, SESSION_TTL_MS, "", id);
    pthread_mutex_unlock(&lock);
    cookie_for(cookie, sizeof(cookie), id, tls);
    return respond(conn, 303, "text/plain", NULL, 0, cookie, "/");
}

enum MHD_Result api_console_handle(struct MHD_Connection *conn, const char *url, const char *method,
                                   struct store *st, int tls)
{
    int get = strcmp(method, "GET") == 0;
    if (strcmp(url, "/") == 0 && get) {
        /* the app to a session, the login page to anyone else */
        const char *id = session_id(conn);
        int in = session_role(st, id) != ROLE_NONE;
        return send_file(conn, in ? "www/index.html" : "www/login.html",
                         "text/html; charset=utf-8");
    }
    if (strcmp(url, "/console/login") == 0) {
        if (get)
            return login_code(conn, tls);
        if (strcmp(method, "POST") == 0)
            return login_token(conn, st, tls);
    }
    if (strcmp(url, "/console/logout") == 0 && strcmp(method, "POST") == 0) {
        if (!has_csrf(conn))
            return send_error(conn, 403, "logout needs the " API_CONSOLE_CSRF_HEADER ": 1 header");
        table_find(sessions, MAX_SESSIONS, session_id(conn), 1);
        char cookie[256];
        cookie_for(cookie, sizeof(cookie), "", tls);
        return send_json(conn, 200, json_object(), cookie);
    }
    if (strcmp(url, "/console/session") == 0 && get) {
        enum api_role role = session_role(st, session_id(conn));
        if (role == ROLE_NONE)
            return send_error(conn, 401, "no console session: log in");
        return send_json(conn, 200, json_pack("{s:s}", "role", api_role_name(role)), NULL);
    }
    for (size_t i = 0; get && i < sizeof(files) / sizeof(files[0]); i++)
        if (strcmp(url, files[i].url) == 0)
            return send_file(conn, files[i].file, files[i].type);
    return send_error(conn, 404, "no such console page");
}

int api_console_link(struct api_req *r, struct api_resp *out)
{
    if (!r->cfg->listen || r->cfg->bound_port <= 0)
        return api_error(out, 412,
                         "mtcd does not listen on TCP: restart it with `mtc daemon start` (or "
                         "mtcd --listen 127.0.0.1:PORT)");
    char host[128];
    const char *colon = strrchr(r->cfg->listen, ':');
    snprintf(host, sizeof(host), "%.*s", (int)(colon - r->cfg->listen), r->cfg->listen);
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    char id[ID_HEX + 1];
    pthread_mutex_lock(&lock);
    table_add(codes, MAX_CODES, r->who.role, CODE_TTL_MS, "", id);
    pthread_mutex_unlock(&lock);
    char base[200], login[400];
    snprintf(base, sizeof(base), "%s://%s:%d/", r->cfg->tls_cert ? "https" : "http", host,
             r->cfg->bound_port);
    snprintf(login, sizeof(login), "%sconsole/login?code=%s", base, id);
    out->body = json_pack("{s:s, s:s, s:i}", "url", base, "loginUrl", login, "expiresInSeconds",
                          (int)(CODE_TTL_MS / 1000));
    return 0;
}
