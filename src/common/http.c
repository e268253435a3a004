/* http: the one client mtc's helper programs (mtc-agent, mtc-simload, mtc-power) reach
 * mtcd with — a JSON POST over mtcd's unix socket or its URL, with a bearer
 * token and mtcd's own CA when given. */
#include "common/common.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct buf {
    char *p;
    size_t len;
};

/* Collect the reply into u (a struct buf), or drop it when u is NULL. */
static size_t take(char *p, size_t size, size_t n, void *u)
{
    struct buf *b = u;
    size_t add = size * n;
    if (!b)
        return add;
    if (b->len + add > (1u << 20))
        return 0; /* a reply over 1 MiB is no answer of mtcd's */
    char *np = realloc(b->p, b->len + add + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, p, add);
    b->p = np;
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

int mtc_mtcd_post(const struct mtc_mtcd *m, const char *path, const char *body, int timeout_s,
                  long *status, char **reply, mtc_error_t *err)
{
    char url[2048], auth[600];
    struct buf b = {NULL, 0};
    *status = 0;
    if (reply)
        *reply = NULL;
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h || !hdrs) {
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        return errprintf(err, "out of memory");
    }
    snprintf(url, sizeof(url), "%s%s", m->url && *m->url ? m->url : "http://localhost", path);
    if (m->token && *m->token) { /* also over the unix socket: it names who asks */
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", m->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (!m->url || !*m->url)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, m->socket);
    if (m->ca_file && *m->ca_file) /* mtcd's own CA (a self-signed certificate) */
        curl_easy_setopt(h, CURLOPT_CAINFO, m->ca_file);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, take);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, reply ? &b : NULL);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    explicit_bzero(auth, sizeof(auth));
    if (rc != CURLE_OK) {
        free(b.p);
        return errprintf(err, "cannot reach mtcd at %s: %s",
                         m->url && *m->url ? m->url : m->socket, curl_easy_strerror(rc));
    }
    if (reply)
        *reply = b.p;
    else
        free(b.p);
    return 0;
}
