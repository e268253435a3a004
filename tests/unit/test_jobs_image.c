/* test_jobs_image: a job's containerImage checked as whom the job runs as
 * (jobs_image_path): for mtcd's own user the reason (missing, no image, a
 * FIFO at once) and the path of the file opened; for a user (nobody, when
 * the test runs as root) one answer for a missing file, a root-only image
 * and a root-only file that is no image, and the reason for a file the user
 * may read. */
#include "check.h"
#include "jobs/jobs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char msg[512];

/* jobs_image_path's result; its error (image replaced by IMAGE) into msg. */
static int image(const char *path, const struct mtc_user *as, struct jobs_paths *p)
{
    mtc_error_t err = {""};
    int rc = jobs_image_path(path, as, p, &err);
    char *at = strstr(err.text, path);
    if (at)
        snprintf(msg, sizeof(msg), "%.*sIMAGE%s", (int)(at - err.text), err.text,
                 at + strlen(path));
    else
        snprintf(msg, sizeof(msg), "%s", err.text);
    return rc;
}

int main(void)
{
    char dir[] = "/tmp/mtc-unit-image-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a directory");
    char sq[sizeof(dir) + 16], txt[sizeof(dir) + 16], none[sizeof(dir) + 16],
        fifo[sizeof(dir) + 16], rel[sizeof(dir) + 40];
    snprintf(sq, sizeof(sq), "%s/i.sqsh", dir);
    snprintf(txt, sizeof(txt), "%s/t.sqsh", dir);
    snprintf(none, sizeof(none), "%s/none.sqsh", dir);
    snprintf(fifo, sizeof(fifo), "%s/f.sqsh", dir);
    snprintf(rel, sizeof(rel), "%s/./../%s/i.sqsh", dir, strrchr(dir, '/') + 1);
    CHECK(mtc_write_file_fmt(sq, 0600, "hsqs and the rest") == 0 &&
              mtc_write_file_fmt(txt, 0600, "no image") == 0 && mkfifo(fifo, 0600) == 0,
          "an image (its magic), a text file, a FIFO");
    struct jobs_paths p;
    CHECK(image(sq, NULL, &p) == 0 && strcmp(p.image, sq) == 0, "an image: its path");
    CHECK(image(rel, NULL, &p) == 0 && strcmp(p.image, sq) == 0,
          "a path with . and ..: the path of the file opened");
    CHECK(image(none, NULL, &p) < 0 && strstr(msg, "containerImage: IMAGE: No such file"),
          "mtcd's own user, a missing file: the reason (%s)", msg);
    CHECK(image(txt, NULL, &p) < 0 && strstr(msg, "IMAGE: not a squashfs image"),
          "mtcd's own user, a text file: not a squashfs image (%s)", msg);
    CHECK(image(fifo, NULL, &p) < 0 && strstr(msg, "IMAGE: not a squashfs image"),
          "a FIFO: no image, at once (%s)", msg);
    CHECK(image("/proc/self/maps", NULL, &p) < 0 && errno == EINVAL,
          "/proc/self/maps: refused (%s)", msg);
    /* registry references (pyxis's rule): passed on to the nodes' plugin as given */
    CHECK(image("nvcr.io#nvidia/pytorch:24.01-py3", NULL, &p) == 0 &&
              strcmp(p.image, "nvcr.io#nvidia/pytorch:24.01-py3") == 0,
          "a registry reference: kept as given for the nodes to pull");
    CHECK(image("docker://ubuntu:24.04", NULL, &p) == 0 && strcmp(p.image, "docker://ubuntu:24.04") == 0,
          "docker://ubuntu:24.04: kept");
    CHECK(image("reg#a/../b:1", NULL, &p) < 0 && strstr(msg, "containerImage: image IMAGE: '..'"),
          "a reference with '..': refused in one line (%s)", msg);
    struct mtc_user u;
    mtc_error_t err = {""};
    if (geteuid() == 0 && mtc_user_lookup("nobody", &u, &err) == 0 && chmod(dir, 0700) == 0) {
        /* a root-only directory: nobody cannot tell what is in it */
        char a[sizeof(msg)], b[sizeof(msg)], c[sizeof(msg)];
        image(none, &u, &p), snprintf(a, sizeof(a), "%s", msg);
        image(sq, &u, &p), snprintf(b, sizeof(b), "%s", msg);
        image(txt, &u, &p), snprintf(c, sizeof(c), "%s", msg);
        CHECK(strcmp(a, "containerImage: cannot read IMAGE as user nobody") == 0 &&
                  strcmp(a, b) == 0 && strcmp(a, c) == 0,
              "as nobody: missing, root-only image, root-only text: one answer (%s | %s | %s)",
              a, b, c);
        CHECK(chmod(dir, 0755) == 0 && chmod(txt, 0644) == 0 && image(txt, &u, &p) < 0 &&
                  strstr(msg, "IMAGE: not a squashfs image"),
              "as nobody, a text file nobody may read: not a squashfs image (%s)", msg);
    }
    unlink(sq), unlink(txt), unlink(fifo), rmdir(dir);
    return check_done();
}
