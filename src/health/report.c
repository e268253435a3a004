/* report: the agent's side of mtcd's :reportHealth — the body and the HTTP
 * POST (unix socket or URL, node token) — shared by mtc-agent and the load
 * generator that plays many agents (mtc-simload), so both send the same. */
#include "health/health.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *health_report_body(const char *node, enum health_mode mode, json_t *results)
{
    return json_pack("{s:s, s:s, s:o}", "nodeId", node, "mode",
                     schema_enum_name(&health_mode_enum, (int)mode), "results", results);
}

/* The reply body of reportHealth is not needed. */
static size_t discard(char *p, size_t size, size_t n, void *u)
{
    (void)p, (void)u;
    return size * n;
}

int health_report_post(const struct health_reporter *rep, const char *body, long *status,
                       mtc_error_t *err)
{
    char url[2048], auth[600];
    long code = 0;
    if (status)
        *status = 0;
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    const char *base = *rep->url ? rep->url : "http://localhost";
    snprintf(url, sizeof(url),
             "%s/v1beta1/projects/%s/locations/%s/modelDevelopmentClusters/%s:reportHealth", base,
             rep->project, rep->location, rep->cluster);
    if (!h || !hdrs) {
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        return errprintf(err, "out of memory");
    }
    if (*rep->token) { /* a node token: also over the unix socket */
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", rep->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (!*rep->url)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, rep->socket);
    if (*rep->ca_file) /* mtcd's own CA (a self-signed certificate) */
        curl_easy_setopt(h, CURLOPT_CAINFO, rep->ca_file);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    explicit_bzero(auth, sizeof(auth));
    if (status)
        *status = code;
    if (rc != CURLE_OK)
        return errprintf(err, "cannot reach mtcd at %s: %s", *rep->url ? rep->url : rep->socket,
                         curl_easy_strerror(rc));
    if (code < 200 || code > 299)
        return errprintf(err, "mtcd answered HTTP %ld to reportHealth", code);
    return 0;
}
