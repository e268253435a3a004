/* conns: mtc-serve's guard against slow clients. A connection gets
 * read_timeout seconds to deliver a complete request (headers and body) —
 * counted from its accept, and again after each response on a kept-alive
 * connection; libmicrohttpd's own timeout is reset by every byte, so a client
 * trickling one byte at a time would hold its thread forever. A watchdog
 * thread answers 408 on the socket and shuts it down, which ends the
 * connection's thread; the request handler refuses a request that timed out
 * just as it completed, so the two never both answer. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve/internal.h"

enum conn_state { READING, HANDLING, TIMED_OUT };

struct serve_conn {
    int fd;
    int64_t since; /* ms: when the request being read began */
    enum conn_state state;
    struct serve_conn *prev, *next;
};

struct serve_conns {
    int timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct serve_conn *head;
    int stopping;
    pthread_t watchdog;
    void (*on_timeout)(void *arg);
    void *arg;
};

static const char reply_408[] =
    "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nConnection: close\r\n"
    "Content-Length: %zu\r\n\r\n%s";

static void *watch(void *arg)
{
    struct serve_conns *c = arg;
    char body[200], msg[400];
    snprintf(body, sizeof(body),
             "{\"error\":{\"message\":\"the request did not arrive within %d s\","
             "\"type\":\"invalid_request_error\",\"code\":408}}",
             c->timeout_ms / 1000);
    int n = snprintf(msg, sizeof(msg), reply_408, strlen(body), body);
    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        struct timespec until = mtc_deadline_ms(200);
        pthread_cond_timedwait(&c->cv, &c->mu, &until);
        int64_t now = mtc_now_ms();
        for (struct serve_conn *k = c->head; k; k = k->next) {
            if (k->state != READING || now - k->since < c->timeout_ms)
                continue;
            /* libmicrohttpd's thread is in recv, not writing: the reply is
             * ours alone; the shutdown makes its recv return and end it */
            k->state = TIMED_OUT;
            if (send(k->fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                (void)errno;
            shutdown(k->fd, SHUT_RDWR);
            if (c->on_timeout)
                c->on_timeout(c->arg);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

struct serve_conns *serve_conns_create(int timeout_s, void (*on_timeout)(void *), void *arg,
                                       mtc_error_t *err)
{
    struct serve_conns *c = calloc(1, sizeof(*c));
    if (!c) {
        errprintf(err, "out of memory");
        return NULL;
    }
    c->timeout_ms = timeout_s * 1000;
    c->on_timeout = on_timeout;
    c->arg = arg;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->watchdog, NULL, watch, c) != 0) {
        errprintf(err, "cannot start the connection watchdog");
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c);
        return NULL;
    }
    return c;
}

void serve_conns_destroy(struct serve_conns *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->watchdog, NULL);
    while (c->head) {
        struct serve_conn *k = c->head;
        c->head = k->next;
        free(k);
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

struct serve_conn *serve_conns_open(struct serve_conns *c, int fd)
{
    struct serve_conn *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->fd = fd;
    k->since = mtc_now_ms();
    pthread_mutex_lock(&c->mu);
    k->next = c->head;
    if (c->head)
        c->head->prev = k;
    c->head = k;
    pthread_mutex_unlock(&c->mu);
    return k;
}

void serve_conns_close(struct serve_conns *c, struct serve_conn *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&c->mu);
    if (k->prev)
        k->prev->next = k->next;
    else
        c->head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    pthread_mutex_unlock(&c->mu);
    free(k);
}

int serve_conns_handle(struct serve_conns *c, struct serve_conn *k)
{
    if (!k)
        return 0;
    pthread_mutex_lock(&c->mu);
    int late = k->state == TIMED_OUT;
    if (!late)
        k->state = HANDLING;
    pthread_mutex_unlock(&c->mu);
    return late ? -1 : 0;
}

void serve_conns_done(struct serve_conns *c, struct serve_conn *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&c->mu);
    if (k->state == HANDLING) {
        k->state = READING;
        k->since = mtc_now_ms();
    }
    pthread_mutex_unlock(&c->mu);
}
