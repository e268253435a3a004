/* test_container_pyxis: pyxis's remaining options, pure — --container-save
 * (made absolute, a file not a directory, no control character),
 * --container-entrypoint / --no-container-entrypoint /
 * --container-entrypoint-log (conflicts), their PYXIS_CONTAINER_* forms
 * after the command line, and the image's entrypoint read from image.json. */
#include "check.h"
#include "spank/container.h"

#include <string.h>

static const char *const *env_table;
static const char *table_get(void *arg, const char *name)
{
    (void)arg;
    for (size_t i = 0; env_table[i]; i += 2)
        if (strcmp(env_table[i], name) == 0)
            return env_table[i + 1];
    return NULL;
}

static void test_save(void)
{
    struct container_opts o;
    mtc_error_t err;
    container_opts_init(&o);
    CHECK(container_opt_set(&o, "container-save", "out/my.sqsh", "/home/u", &err) == 0 &&
              strcmp(o.save, "/home/u/out/my.sqsh") == 0,
          "--container-save: relative to the step's directory (%s)", o.save);
    CHECK(container_opt_set(&o, "container-save", "/data/", "/", &err) < 0 &&
              strstr(err.text, "names a directory"),
          "a directory is refused (%s)", err.text);
    CHECK(container_opt_set(&o, "container-save", "/data/..", "/", &err) < 0, "'..' is refused");
    CHECK(container_opt_set(&o, "container-save", "/data/a\nb", "/", &err) < 0 &&
              strstr(err.text, "control character"),
          "a control character is refused");
    CHECK(container_opt_set(&o, "container-save", "", "/", &err) < 0 &&
              strstr(err.text, "argument required"),
          "an empty path is refused");
}

static void test_entrypoint(void)
{
    struct container_opts o;
    mtc_error_t err;
    container_opts_init(&o);
    CHECK(o.entrypoint == -1 && o.entrypoint_log == -1, "unset by default (no entrypoint runs)");
    CHECK(container_opt_set(&o, "container-entrypoint", NULL, NULL, &err) == 0 && o.entrypoint == 1,
          "--container-entrypoint");
    CHECK(container_opt_set(&o, "no-container-entrypoint", NULL, NULL, &err) < 0 &&
              strstr(err.text, "conflicts"),
          "--no-container-entrypoint after it conflicts");
    CHECK(container_opt_set(&o, "container-entrypoint-log", NULL, NULL, &err) == 0 &&
              o.entrypoint_log == 1 && o.entrypoint == 1,
          "--container-entrypoint-log sets the log alone");
    container_opts_init(&o);
    CHECK(container_opt_set(&o, "no-container-entrypoint", NULL, NULL, &err) == 0 &&
              o.entrypoint == 0,
          "--no-container-entrypoint");
    size_t names = 0;
    for (size_t i = 0; i < container_noptdefs; i++)
        names += strstr(container_optdefs[i].name, "entrypoint") ||
                 strstr(container_optdefs[i].name, "save");
    CHECK(names == 4, "the option table lists the four (srun --help)");
}

static void test_env_forms(void)
{
    struct container_opts o;
    mtc_error_t err;
    static const char *const vars[] = {"PYXIS_CONTAINER_IMAGE",
                                       "/i.sqsh",
                                       "PYXIS_CONTAINER_SAVE",
                                       "/env/saved.sqsh",
                                       "PYXIS_CONTAINER_ENTRYPOINT",
                                       "1",
                                       "PYXIS_CONTAINER_ENTRYPOINT_LOG",
                                       "yes",
                                       NULL};
    env_table = vars;
    container_opts_init(&o);
    CHECK(container_opts_from_env(&o, table_get, NULL, "/", &err) == 0 &&
              strcmp(o.save, "/env/saved.sqsh") == 0 && o.entrypoint == 1 && o.entrypoint_log == 1,
          "PYXIS_CONTAINER_SAVE, _ENTRYPOINT, _ENTRYPOINT_LOG");
    container_opts_init(&o);
    container_opt_set(&o, "container-save", "/cli.sqsh", NULL, &err);
    container_opt_set(&o, "no-container-entrypoint", NULL, NULL, &err);
    CHECK(container_opts_from_env(&o, table_get, NULL, "/", &err) == 0 &&
              strcmp(o.save, "/cli.sqsh") == 0 && o.entrypoint == 0,
          "the command line wins over them");
    static const char *const bad[] = {"PYXIS_CONTAINER_ENTRYPOINT", "sometimes", NULL};
    env_table = bad;
    container_opts_init(&o);
    CHECK(container_opts_from_env(&o, table_get, NULL, "/", &err) < 0 &&
              strstr(err.text, "PYXIS_CONTAINER_ENTRYPOINT: 'sometimes' is not 0 or 1"),
          "a bad boolean is named (%s)", err.text);
}

static void test_image_entrypoint(void)
{
    char ep[4][1024];
    size_t n = 9;
    CHECK(container_image_entrypoint("{\"workingDir\":\"/w\",\"entrypoint\": [\"/usr/bin/ep.sh\", "
                                     "\"--a \\\"b\\\"\"],\"cmd\":[\"x\"]}",
                                     ep, 4, &n) == 0 &&
              n == 2 && strcmp(ep[0], "/usr/bin/ep.sh") == 0 && strcmp(ep[1], "--a \"b\"") == 0,
          "image.json's entrypoint, escapes undone (%zu: %s)", n, n > 1 ? ep[1] : "");
    CHECK(container_image_entrypoint("{\"entrypoint\":[]}", ep, 4, &n) == 0 && n == 0,
          "an empty one");
    CHECK(container_image_entrypoint("{\"cmd\":[\"x\"]}", ep, 4, &n) == 0 && n == 0, "none");
    CHECK(container_image_entrypoint(NULL, ep, 4, &n) == 0 && n == 0, "no image.json");
    CHECK(container_image_entrypoint("{\"entrypoint\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", ep, 4,
                                     &n) < 0,
          "more words than room: refused");
    CHECK(container_image_entrypoint("{\"entrypoint\":[\"unterminated]}", ep, 4, &n) < 0,
          "an unterminated string: refused");
}

int main(void)
{
    test_save();
    test_entrypoint();
    test_env_forms();
    test_image_entrypoint();
    return check_done();
}
