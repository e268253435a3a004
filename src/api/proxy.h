/* proxy.h: the endpoint proxy's interface to the HTTP glue (server.c); not
 * part of the module's interface. */
#ifndef MTC_API_PROXY_H
#define MTC_API_PROXY_H

#include "api/api.h"

#include <microhttpd.h>

/* The proxy of routed requests (proxy.c), driven by server.c. api_proxy_request
 * is called on a proxied request's last callback and on every resume: the
 * first call checks it, takes body (malloc'd, len bytes; NULL 0) and starts
 * a worker, *state then holds the request's proxy. api_proxy_end: the
 * connection ended (its notify-completed). api_proxy_stop: no new proxies,
 * running ones abort; waits up to wait_ms for them. */
struct api_proxy;
enum MHD_Result api_proxy_request(struct MHD_Connection *conn, struct api_req *r, char *body,
                                  size_t len, struct api_proxy **state);
void api_proxy_end(struct api_proxy *p);
void api_proxy_stop(int wait_ms);
/* (Again) accept proxied requests: api_start. */
void api_proxy_allow(void);

#endif
