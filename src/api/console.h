/* console: the web console's side of mtcd's TCP listener — its static files
 * (a fixed table under share/mtc/www plus Debian's Chart.js), login (a token,
 * or a one-time link from `mtc console`, exchanged for an HttpOnly
 * SameSite=Strict session cookie), logout, and the cookie's principal for
 * every other request (state-changing ones also need the X-MTC-CSRF header).
 * Sessions live in mtcd's memory and expire. docs/console.md. */
#ifndef MTC_API_CONSOLE_H
#define MTC_API_CONSOLE_H

#include "api/api.h"

#include <microhttpd.h>

/* The header a state-changing request with a session cookie must carry. */
#define API_CONSOLE_CSRF_HEADER "X-MTC-CSRF"

/* Is url one of the console's own paths ("/", "/console/...")? */
int api_console_owns(const char *url);
/* Answer a console path: a static file, the login page or a login/logout. */
enum MHD_Result api_console_handle(struct MHD_Connection *conn, const char *url, const char *method,
                                   struct store *st, int tls);
/* The principal of a request without an Authorization header from its
 * session cookie: 1 (who filled), 0 (no session cookie), -1 (an unknown or
 * expired session, one whose token was revoked, or a state-changing request
 * without the CSRF header; *why says which). */
int api_console_principal(struct MHD_Connection *conn, struct store *st, const char *method,
                          struct api_principal *who, const char **why);
/* POST /v1/consoleLinks (admin): a one-time login link to the console,
 * valid 5 minutes, for mtcd's TCP address. */
int api_console_link(struct api_req *r, struct api_resp *out);

#endif
