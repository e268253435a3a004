/* test_image_ref: enroot/pyxis image references — paths told from references,
 * Docker Hub's defaults, '#' registries, USER@, tags and pinned digests,
 * skopeo's form, and the references refused (space, control character, "..",
 * bad digest, other schemes); enroot's .credentials lines as enroot reads them
 * (host with or without port, Docker Hub's names, USER@, '$' passwords). */
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

static int lookup(const char *creds, const char *refs, char *login, char *pw, int *eval)
{
    struct image_ref r;
    mtc_error_t err;
    char text[1024], *l = NULL, *p = NULL;
    snprintf(text, sizeof(text), "%s", creds);
    login[0] = pw[0] = '\0';
    *eval = -1;
    if (image_ref_parse(refs, &r, &err) < 0 || !image_creds_lookup(text, &r, &l, &p, eval))
        return 0;
    strcpy(login, l);
    strcpy(pw, p);
    return 1;
}

static void test_creds(void)
{
    char l[256], p[256];
    int ev;
    const char *f = "machine nvcr.io login $oauthtoken password nvapi-123\n"
                    "machine gcr.io login oauth2accesstoken password $(gcloud auth print-access-token)\n"
                    "machine 127.0.0.1 login alice password a-pw\n"
                    "machine 127.0.0.1 login bob password b-pw\n"
                    "machine auth.docker.io login hubuser password $HUB_PW\n"
                    "garbage line\n";
    CHECK(lookup(f, "nvcr.io#nvidia/pytorch:24.01-py3", l, p, &ev) &&
              strcmp(l, "$oauthtoken") == 0 && strcmp(p, "nvapi-123") == 0 && ev == 0,
          "NGC: the login $oauthtoken is literal, the password plain");
    CHECK(lookup(f, "gcr.io#proj/img:1", l, p, &ev) && ev == 1 &&
              strcmp(p, "$(gcloud auth print-access-token)") == 0,
          "a '$' password is the rest of the line, to evaluate (%s)", p);
    CHECK(lookup(f, "127.0.0.1:5000#test/app:1", l, p, &ev) && strcmp(l, "alice") == 0,
          "a registry's port is not in netrc's machine: the first entry");
    CHECK(lookup(f, "bob@127.0.0.1:5000#test/app:1", l, p, &ev) && strcmp(l, "bob") == 0 &&
              strcmp(p, "b-pw") == 0,
          "USER@ picks that login");
    CHECK(!lookup(f, "carol@127.0.0.1:5000#test/app:1", l, p, &ev), "USER@ with no entry: none");
    CHECK(lookup(f, "ubuntu:24.04", l, p, &ev) && strcmp(l, "hubuser") == 0 && ev == 1,
          "Docker Hub: auth.docker.io's entry");
    CHECK(!lookup(f, "quay.io#a/b", l, p, &ev), "another registry: none");
    CHECK(!lookup("machine 127.0.0.1 login alice\n", "127.0.0.1#a/b", l, p, &ev),
          "an entry without a password: none");
}

int main(void)
{
    test_creds();
    test_paths();
    test_parse();
    test_refused();
    return check_done();
}
