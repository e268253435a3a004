/* test_image: the pure pieces of the image module — tar member names (escapes,
 * "..", canonical form), whiteout names, digests, the config as image.json and
 * /etc/environment, and layouts read from small directories (OCI index →
 * manifest, docker save, nested index, a missing blob, a path out of the layout,
 * index.json linked out of it), and a layout checked against its digest. */
#include "check.h"
#include "image/image.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *H1 = "1111111111111111111111111111111111111111111111111111111111111111";
static const char *H2 = "2222222222222222222222222222222222222222222222222222222222222222";
static const char *H3 = "3333333333333333333333333333333333333333333333333333333333333333";
static const char *H4 = "4444444444444444444444444444444444444444444444444444444444444444";

static void test_members(void)
{
    char s[256];
    static const struct {
        const char *in, *want;
    } ok[] = {
        {"./etc/passwd", "etc/passwd"}, {"/etc//x/", "etc/x"}, {"./", ""}, {"a/./b", "a/b"},
        {"..a/b..", "..a/b.."},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        snprintf(s, sizeof(s), "%s", ok[i].in);
        CHECK(image_member_clean(s) == 0, "member \"%s\" accepted", ok[i].in);
        CHECK_STR(s, ok[i].want, "member \"%s\" canonical", ok[i].in);
    }
    static const char *const bad[] = {"../x", "a/../../x", "a/..", "./.."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(s, sizeof(s), "%s", bad[i]);
        CHECK(image_member_clean(s) < 0, "member \"%s\" refused", bad[i]);
    }
    snprintf(s, sizeof(s), "%s", "a\\\\b\\nc\\303\\251 d");
    CHECK(image_tar_unescape(s) == 0 && strcmp(s, "a\\b\nc\xc3\xa9 d") == 0, "tar escapes undone");
    snprintf(s, sizeof(s), "%s", "bad\\q");
    CHECK(image_tar_unescape(s) < 0, "a malformed escape refused");
}

static void test_whiteouts(void)
{
    char t[256];
    CHECK(image_whiteout("etc/.wh.passwd", t, sizeof(t)) == IMAGE_WH_FILE &&
              strcmp(t, "etc/passwd") == 0,
          ".wh.NAME removes D/NAME");
    CHECK(image_whiteout(".wh.top", t, sizeof(t)) == IMAGE_WH_FILE && strcmp(t, "top") == 0,
          ".wh.NAME at the root");
    CHECK(image_whiteout("opt/data/.wh..wh..opq", t, sizeof(t)) == IMAGE_WH_OPAQUE &&
              strcmp(t, "opt/data") == 0,
          ".wh..wh..opq empties its directory");
    CHECK(image_whiteout(".wh..wh..opq", t, sizeof(t)) == IMAGE_WH_OPAQUE && t[0] == '\0',
          "opaque root");
    CHECK(image_whiteout("etc/passwd", t, sizeof(t)) == IMAGE_WH_NONE, "a plain file");
    CHECK(image_whiteout("etc/x.wh.y", t, sizeof(t)) == IMAGE_WH_NONE, ".wh. inside a name");
    CHECK(image_whiteout("etc/.wh...", t, sizeof(t)) == IMAGE_WH_NONE &&
              image_whiteout("etc/.wh.", t, sizeof(t)) == IMAGE_WH_NONE,
          "whiteouts of \"..\" and \"\" are not whiteouts");
}

static void test_config(void)
{
    mtc_error_t err = {""};
    char d[80];
    snprintf(d, sizeof(d), "sha256:%s", H1);
    CHECK(image_digest_valid(d), "a sha256 digest");
    CHECK(!image_digest_valid("sha256:abc") && !image_digest_valid("sha512:1") &&
              !image_digest_valid(NULL),
          "short, other algorithms, none: invalid");
    d[10] = 'A';
    CHECK(!image_digest_valid(d), "upper-case hex invalid");

    json_t *cfg = json_loads("{\"config\":{\"Env\":[\"PATH=/bin\",\"A=b=c\"],\"WorkingDir\":"
                             "\"/w\",\"Entrypoint\":[\"/e\"],\"Cmd\":null}}",
                             0, NULL);
    json_t *m = image_meta_from_config(cfg, "src.tar", &err);
    CHECK(m, "config → image.json (%s)", err.text);
    CHECK_STR(json_string_value(json_object_get(m, "workingDir")), "/w", "workingDir");
    CHECK(json_array_size(json_object_get(m, "cmd")) == 0, "Cmd null → []");
    CHECK_STR(json_string_value(json_object_get(m, "source")), "src.tar", "source");
    char *env = image_env_format(json_object_get(m, "env"), &err);
    CHECK_STR(env, "PATH=/bin\nA=b=c\n", "/etc/environment lines");
    free(env);
    json_decref(m);
    json_decref(cfg);

    cfg = json_loads("{\"config\":{\"Env\":[\"X=a\\nb\"]}}", 0, NULL);
    CHECK(!image_meta_from_config(cfg, "s", &err) && strstr(err.text, "Env X") &&
              strstr(err.text, "newline"),
          "an Env value with a newline refused (%s)", err.text);
    json_decref(cfg);
    cfg = json_loads("{\"config\":{\"Entrypoint\":\"/bin/sh\"}}", 0, NULL);
    CHECK(!image_meta_from_config(cfg, "s", &err) && strstr(err.text, "Entrypoint"),
          "an Entrypoint that is no list refused (%s)", err.text);
    json_decref(cfg);
    cfg = json_loads("{}", 0, NULL);
    m = image_meta_from_config(cfg, "s", &err);
    CHECK(m && json_array_size(json_object_get(m, "env")) == 0 &&
              strcmp(json_string_value(json_object_get(m, "workingDir")), "/") == 0,
          "an empty config: no env, workingDir /");
    json_decref(m);
    json_decref(cfg);

    json_t *e = image_env_parse("# c\n\nA=1\nexport B=\"two words\"\nnot a line\nC='x'\n");
    char *s = json_dumps(e, JSON_COMPACT);
    CHECK_STR(s, "[\"A=1\",\"B=two words\",\"C=x\"]", "/etc/environment parsed");
    free(s);
    json_decref(e);
}

/* A small layout under dir: files named by path with content. */
static void put(const char *dir, const char *path, const char *text)
{
    char p[4096], cmd[4200];
    snprintf(p, sizeof(p), "%s/%s", dir, path);
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
    if (system(cmd) != 0)
        return;
    mtc_write_file_atomic(p, text, strlen(text), 0644);
}

static void test_layouts(void)
{
    char dir[] = "/tmp/test_image.XXXXXX", body[1024], path[256];
    mtc_error_t err = {""};
    if (!mkdtemp(dir))
        return;
    /* OCI: a nested index (a list of platforms) → manifest → config + 2 layers */
    snprintf(body, sizeof(body),
             "{\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
             "\"digest\":\"sha256:%s\"}]}",
             H4);
    put(dir, "index.json", body);
    snprintf(body, sizeof(body),
             "{\"manifests\":[{\"digest\":\"sha256:%s\",\"platform\":{\"os\":\"linux\","
             "\"architecture\":\"arm64\"}},{\"digest\":\"sha256:%s\",\"platform\":{\"os\":"
             "\"linux\",\"architecture\":\"amd64\"}}]}",
             H4, H1);
    snprintf(path, sizeof(path), "blobs/sha256/%s", H4);
    put(dir, path, body);
    snprintf(body, sizeof(body),
             "{\"config\":{\"digest\":\"sha256:%s\"},\"layers\":[{\"digest\":\"sha256:%s\"},"
             "{\"digest\":\"sha256:%s\"}]}",
             H2, H3, H2);
    snprintf(path, sizeof(path), "blobs/sha256/%s", H1);
    put(dir, path, body);
    snprintf(path, sizeof(path), "blobs/sha256/%s", H2);
    put(dir, path, "{}");
    struct image_plan *p = image_plan_read(dir, &err);
    CHECK(!p && strstr(err.text, "the layer sha256:3333"), "a missing layer blob named (%s)",
          err.text);
    image_plan_destroy(p);
    snprintf(path, sizeof(path), "blobs/sha256/%s", H3);
    put(dir, path, "layer");
    p = image_plan_read(dir, &err);
    CHECK(p && p->oci && p->nlayers == 2, "OCI plan: the amd64 manifest, 2 layers (%s)", err.text);
    if (p) {
        CHECK(strncmp(p->layers[0].path, "blobs/sha256/3333", 17) == 0 &&
                  strncmp(p->layers[0].digest, "sha256:3333", 11) == 0 &&
                  strncmp(p->config.digest, "sha256:2222", 11) == 0,
              "OCI plan: paths and digests, bottom layer first");
        image_plan_destroy(p);
    }

    /* docker save: digests from the paths and from rootfs.diff_ids */
    char dk[300];
    snprintf(dk, sizeof(dk), "%s/docker", dir);
    snprintf(body, sizeof(body),
             "[{\"Config\":\"%s.json\",\"Layers\":[\"%s/layer.tar\",\"l2/layer.tar\"]}]", H1, H2);
    put(dk, "manifest.json", body);
    snprintf(body, sizeof(body), "{\"rootfs\":{\"diff_ids\":[\"sha256:%s\",\"sha256:%s\"]}}", H2,
             H3);
    snprintf(path, sizeof(path), "%s.json", H1);
    put(dk, path, body);
    snprintf(path, sizeof(path), "%s/layer.tar", H2);
    put(dk, path, "l1");
    put(dk, "l2/layer.tar", "l2");
    p = image_plan_read(dk, &err);
    CHECK(p && !p->oci && p->nlayers == 2, "docker plan (%s)", err.text);
    if (p) {
        CHECK(strncmp(p->config.digest, "sha256:1111", 11) == 0 &&
                  strncmp(p->layers[0].digest, "sha256:2222", 11) == 0 &&
                  strncmp(p->layers[1].digest, "sha256:3333", 11) == 0,
              "docker plan: config digest from its name, layer 2's from diff_ids");
        image_plan_destroy(p);
    }
    snprintf(body, sizeof(body), "[{\"Config\":\"%s.json\",\"Layers\":[\"../../etc/passwd\"]}]",
             H1);
    put(dk, "manifest.json", body);
    p = image_plan_read(dk, &err);
    CHECK(!p && strstr(err.text, "not a path inside the image"),
          "a layer path out of the layout refused (%s)", err.text);
    snprintf(path, sizeof(path), "%s/empty", dir);
    mkdir(path, 0755);
    CHECK(!image_plan_read(path, &err) && strstr(err.text, "no index.json or manifest.json"),
          "neither index.json nor manifest.json");
    /* index.json a link to a file outside the layout (root unpacks users'
     * archives): not read, its text never quoted in the error */
    char ln[4096], secret[4096];
    snprintf(path, sizeof(path), "%s/linked", dir);
    mkdir(path, 0755);
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    put(dir, "secret", "TOPSECRET not json");
    snprintf(ln, sizeof(ln), "%s/index.json", path);
    CHECK(symlink(secret, ln) == 0 && !image_plan_read(path, &err) &&
              strstr(err.text, "index.json: not a file inside the image") &&
              !strstr(err.text, "TOPSECRET"),
          "index.json linked out of the layout: refused, not read (%s)", err.text);
    /* image_layout_is: index.json names one manifest whose bytes hash to the digest */
    snprintf(path, sizeof(path), "%s/one", dir);
    const char *m = "{\"layers\":[]}";
    char hex[65], dg[80], idx[300], mp[200];
    mtc_sha256_hex(m, hex);
    snprintf(dg, sizeof(dg), "sha256:%s", hex);
    snprintf(mp, sizeof(mp), "blobs/sha256/%s", hex);
    put(path, mp, m);
    snprintf(idx, sizeof(idx), "{\"manifests\":[{\"digest\":\"%s\"}]}", dg);
    put(path, "index.json", idx);
    CHECK(image_layout_is(path, dg, &err) == 0, "the layout of its digest");
    CHECK(image_layout_is(path, "sha256:" "1111111111111111111111111111111111111111111111111111111111111111", &err) < 0 &&
              strstr(err.text, "does not name"),
          "another digest: refused (%s)", err.text);
    put(path, mp, "{\"layers\": []}");
    CHECK(image_layout_is(path, dg, &err) < 0 && strstr(err.text, "does not match"),
          "a manifest changed under its digest: refused (%s)", err.text);
    if (!getenv("KEEP"))
        mtc_rm_rf(dir);
}

int main(void)
{
    test_members();
    test_whiteouts();
    test_config();
    test_layouts();
    return check_done();
}
