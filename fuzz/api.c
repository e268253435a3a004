/* Fuzz harness: the HTTP API in process, without sockets — route lookup, role
 * check, JSON body and handler — against a real store and a control layer
 * that is already stopped (so no operation ever starts a daemon).
 * Input: "METHOD PATH[?QUERY]\n" then a role digit (0 none, 1 node, 2 viewer,
 * 3 editor, 4 admin, 5 registrar) with an optional " cluster node" for a
 * node token, "\n", then the body bytes.
 * Checks: every reply is a JSON object; an error's code is its HTTP status. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "control/control.h"
#include "provider/provider.h"
#include "store/store.h"
#include "files.h"
#include "text.h"

static struct store *st;
static struct provider *prov;
static struct control *ctl;
static const char *const nvml[] = {"/usr/lib/fake-nvml.so", NULL};
static struct api_config cfg = {.nvml_libraries = nvml};

static void setup(void)
{
    char path[128];
    mtc_error_t err;
    fuzz_make_dir("api"); /* removed at exit */
    fuzz_path(path, sizeof(path), "mtcd.db");
    log_open("/dev/null", "fuzz", LOG_EMERG);
    st = store_open(path, &err);
    prov = st ? provider_create("local", fuzz_dir, &err) : NULL;
    ctl = prov ? control_create(st, prov, 1000, &err) : NULL;
    if (!ctl)
        abort();
    control_stop(ctl, 0); /* submits are refused: nothing runs */
    cfg.home = fuzz_dir;
    cfg.store = st;
    cfg.control = ctl;
}

/* Split line into method, path and query (in place). */
static int request_line(char *line, struct api_req *r)
{
    char *sp = strchr(line, ' ');
    if (!sp)
        return -1;
    *sp = '\0';
    r->method = line;
    r->path = sp + 1;
    char *q = strchr(sp + 1, '?');
    if (q) {
        *q = '\0';
        r->query = q + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!st)
        setup();
    char *text = fuzz_text(data, size);
    if (!text)
        return 0;
    char *nl1 = memchr(text, '\n', size),
         *nl2 = nl1 ? memchr(nl1 + 1, '\n', size - (size_t)(nl1 + 1 - text)) : NULL;
    if (!nl2) {
        free(text);
        return 0;
    }
    *nl1 = *nl2 = '\0';
    struct api_req r = {.cfg = &cfg, .st = st, .ctl = ctl};
    if (request_line(text, &r) < 0 || !*r.path) {
        free(text);
        return 0;
    }
    /* the corpus's digits; ROLE_REGISTRAR came later, as 5, so an admin is 4 still */
    static const enum api_role roles[] = {ROLE_NONE,   ROLE_NODE,  ROLE_VIEWER,
                                          ROLE_EDITOR, ROLE_ADMIN, ROLE_REGISTRAR};
    unsigned char rc = (unsigned char)nl1[1];
    r.who.role = roles[(rc >= '0' && rc <= '5' ? rc - '0' : rc) % 6];
    sscanf(nl1 + 2, " %15s %63s", r.who.cluster, r.who.node);
    const char *body = nl2 + 1;
    size_t len = size - (size_t)(body - text);
    struct api_resp out = {0};
    int status = 0;
    const struct api_route *route = api_route_find(&r, &status);
    if (route && api_authorize(&r, route, &out) == 0)
        api_run(&r, route, body, len, &out);
    if (out.body) {
        json_t *e = json_object_get(out.body, "error");
        if (!json_is_object(out.body) || out.status < 200 || out.status > 599 ||
            (e && json_integer_value(json_object_get(e, "code")) != out.status))
            abort();
    }
    json_decref(out.body);
    free(out.text);
    free(text);
    return 0;
}
