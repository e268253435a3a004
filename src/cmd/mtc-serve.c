/* mtc-serve: serve a GPT-2 or Llama model over OpenAI-compatible HTTP (docs/serve.md).
 * Listens first (/health says 503 while loading), loads, prints "listening on HOST:PORT",
 * runs until SIGTERM/SIGINT. Exit 0 after a signal, 1 on error, 2 on bad usage. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: mtc-serve --model REF --listen HOST:PORT [--max-batch N] [--ctx N]\n"
               "                 [--threads N] [--dtype f32|bf16|q8_0] [--served-name NAME]\n"
               "                 [--tokenizer PATH]\n"
               "                 [--max-connections N] [--max-connections-per-ip N]\n"
               "                 [--max-body BYTES] [--request-timeout S] [--idle-timeout S]\n"
               "                 [--home DIR]\n"
               "                 [--project P --location L]\n"
               "       mtc-serve --version\n"
               "  REF: a registered model version NAME, NAME@N or NAME@ALIAS (registry in\n"
               "  --home, default $MTC_HOME or ~/.mtc), a checkpoint directory (its newest\n"
               "  step, or a step_N directory) or a Hugging Face directory (config.json,\n"
               "  model.safetensors, tokenizer.json)\n");
}

/* A whole number in [lo, hi] or exit 2 naming the option. */
static long number(const char *opt, const char *v, long lo, long hi)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < lo || n > hi) {
        fprintf(stderr, "mtc-serve: --%s %s: want a whole number from %ld to %ld\n", opt, v, lo,
                hi);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    struct serve_config c = {0};
    static const struct option lo[] = {
        {"model", required_argument, NULL, 'm'},     {"listen", required_argument, NULL, 'l'},
        {"max-batch", required_argument, NULL, 'b'}, {"ctx", required_argument, NULL, 'c'},
        {"threads", required_argument, NULL, 't'},   {"served-name", required_argument, NULL, 'n'},
        {"tokenizer", required_argument, NULL, 'k'}, {"max-connections", required_argument, NULL, 'C'},
        {"max-body", required_argument, NULL, 'B'},  {"help", no_argument, NULL, 'h'},
        {"home", required_argument, NULL, 'H'},      {"project", required_argument, NULL, 'P'},
        {"location", required_argument, NULL, 'L'},  {"idle-timeout", required_argument, NULL, 'I'},
        {"max-connections-per-ip", required_argument, NULL, 'E'},
        {"request-timeout", required_argument, NULL, 'R'},
        {"dtype", required_argument, NULL, 'D'},
        {"version", no_argument, NULL, 'V'},
        {0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (o) {
        case 'm': c.model = optarg; break;
        case 'l': c.listen = optarg; break;
        case 'b': c.max_batch = (int)number("max-batch", optarg, 1, 1024); break;
        case 'c': c.ctx = (int)number("ctx", optarg, 2, 1 << 24); break;
        case 't': c.threads = (int)number("threads", optarg, 1, 1024); break;
        case 'n': c.served_name = optarg; break;
        case 'k': c.tokenizer = optarg; break;
        case 'C': c.max_conn = (int)number("max-connections", optarg, 1, 100000); break;
        case 'B': c.max_body = (size_t)number("max-body", optarg, 1024, 1L << 30); break;
        case 'H': c.home = optarg; break;
        case 'I': c.idle_timeout = (int)number("idle-timeout", optarg, 1, 86400); break;
        case 'E': c.max_conn_per_ip = (int)number("max-connections-per-ip", optarg, 1, 100000); break;
        case 'R': c.request_timeout = (int)number("request-timeout", optarg, 1, 3600); break;
        case 'D':
            if (cpu_dtype_parse(optarg, &c.dtype) < 0) {
                fprintf(stderr, "mtc-serve: --dtype %s: want f32, bf16 or q8_0\n", optarg);
                return 2;
            }
            break;
        case 'P': c.project = optarg; break;
        case 'L': c.location = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("mtc-serve %s\n", mtc_version()); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !c.model || !c.listen) {
        fprintf(stderr, "mtc-serve: %s\n",
                optind < argc ? "unexpected argument" : "--model and --listen are required");
        usage(stderr);
        return 2;
    }
    static char home[4096];
    if (!c.home && getenv("MTC_HOME") && *getenv("MTC_HOME"))
        c.home = getenv("MTC_HOME");
    if (!c.home) {
        snprintf(home, sizeof home, "%s/.mtc", getenv("HOME") ? getenv("HOME") : "/root");
        c.home = home;
    }
    // signals are taken by sigwait below; every thread started after this inherits the mask
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    mtc_error_t err;
    struct serve *s = serve_create(&c, &err);
    if (!s) {
        fprintf(stderr, "mtc-serve: %s\n", err.text);
        return 1;
    }
    if (serve_load(s, &err) < 0) {
        fprintf(stderr, "mtc-serve: %s\n", err.text);
        serve_destroy(s);
        return 1;
    }
    char host[256];
    snprintf(host, sizeof host, "%s", c.listen);
    *strrchr(host, ':') = 0;
    printf("mtc-serve: serving %s (%s weights) on %s:%d\n", serve_name(s),
           cpu_dtype_name(c.dtype), host, serve_port(s));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "mtc-serve: %s, stopping\n", strsignal(sig));
    serve_destroy(s);
    return 0;
}
