/* test_image_ref: enroot/pyxis image references — paths told from references,
 * Docker Hub's defaults, '#' registries, USER@, tags and pinned digests,
 * skopeo's form, and the references refused (space, control character, "..",
 * bad digest, other schemes). */
#include "check.h"
#include "image/image.h"

#include <string.h>

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_paths(void)
{
    static const struct {
        const char *s;
        int path;
    } t[] = {
        {"/shared/app.sqsh", 1}, {"./app", 1},         {"app.sqsh", 1},
        {"../x.sqsh", 1},        {"x.squashfs", 1},    {"ubuntu", 0},
        {"ubuntu:24.04", 0},     {"nvcr.io#nvidia/pytorch:24.01-py3", 0},
        {"docker://a/b.sqsh", 0}, {"127.0.0.1:5000#test/app:1", 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        CHECK(image_ref_is_path(t[i].s) == t[i].path, "%s is %s", t[i].s,
              t[i].path ? "a path" : "a reference");
}

static void test_parse(void)
{
    struct image_ref r;
    mtc_error_t err;
    char f[600];
    CHECK(image_ref_parse("ubuntu:24.04", &r, &err) == 0, "ubuntu:24.04 parses");
    CHECK_STR(r.registry, "registry-1.docker.io", "no registry: Docker Hub");
    CHECK_STR(r.repo, "library/ubuntu", "a one-word name is under library/");
    CHECK_STR(r.tag, "24.04", "the tag");
    image_ref_format(&r, NULL, f, sizeof(f));
    CHECK_STR(f, "docker://docker.io/library/ubuntu:24.04", "skopeo's form of a Hub image");

    CHECK(image_ref_parse("docker://nvcr.io#nvidia/pytorch:24.01-py3", &r, &err) == 0,
          "docker://nvcr.io#nvidia/pytorch:24.01-py3 parses");
    CHECK_STR(r.registry, "nvcr.io", "'#' separates the registry");
    CHECK_STR(r.repo, "nvidia/pytorch", "the repository");
    CHECK_STR(r.tag, "24.01-py3", "the tag");

    CHECK(image_ref_parse("alice@127.0.0.1:5000#test/app", &r, &err) == 0, "USER@ with a port");
    CHECK_STR(r.user, "alice", "the user");
    CHECK_STR(r.registry, "127.0.0.1:5000", "a registry with a port");
    CHECK_STR(r.tag, "latest", "no tag: latest");

    CHECK(image_ref_parse("127.0.0.1:5000#test/app@sha256:" D64, &r, &err) == 0, "a pinned digest");
    CHECK_STR(r.digest, "sha256:" D64, "the digest");
    CHECK_STR(r.tag, "", "no tag with a digest alone");
    CHECK_STR(r.user, "", "@sha256 is not a user");
    image_ref_format(&r, NULL, f, sizeof(f));
    CHECK_STR(f, "docker://127.0.0.1:5000/test/app@sha256:" D64, "skopeo's form pins the digest");
    image_ref_format(&r, "sha256:" D64, f, sizeof(f));
    CHECK(strstr(f, "@sha256:") != NULL, "a resolved digest replaces the tag");

    CHECK(image_ref_parse("bob@reg.example.com#a/b/c:v1.2_x", &r, &err) == 0 &&
              strcmp(r.repo, "a/b/c") == 0 && strcmp(r.tag, "v1.2_x") == 0 &&
              strcmp(r.user, "bob") == 0,
          "nested repository, user and tag");
}

static void test_refused(void)
{
    struct image_ref r;
    mtc_error_t err;
    static const struct {
        const char *s, *want;
    } t[] = {
        {"ubuntu :1", "space"},
        {"reg#a/b\n:1", "control"},
        {"reg#a/../b", "'..'"},
        {"reg#a/b@sha256:1234", "bad digest"},
        {"http://reg/a", "scheme"},
        {"reg#A/B", "bad image name"},
        {"reg#a/b:", "bad tag"},
        {"#a/b", "bad registry"},
        {"", "empty"},
        {"reg#a//b", "bad image name"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int rc = image_ref_parse(t[i].s, &r, &err);
        CHECK(rc == -1 && strstr(err.text, t[i].want) && !strchr(err.text, '\n'),
              "refused in one line (%s): %s", t[i].want, rc == -1 ? err.text : "accepted");
    }
}

int main(void)
{
    test_paths();
    test_parse();
    test_refused();
    return check_done();
}
