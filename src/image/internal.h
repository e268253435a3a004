/* image internals: what import.c, trainer.c, squash.c, cache.c and pull.c share — the work
 * directory, running the tools (tar, cp, ldd, mksquashfs), the image's config
 * files and writing the squashfs file. Not part of the module's interface. */
#ifndef MTC_IMAGE_INTERNAL_H
#define MTC_IMAGE_INTERNAL_H

#include "image/image.h"

#include <sys/types.h>

/* A fresh private directory $TMPDIR/mtc-image.XXXXXX (/tmp without TMPDIR)
 * into buf. 0, or -1 with err. */
int image_workdir(char *buf, size_t len, mtc_error_t *err);
/* Check that out can be written (creates and removes out.tmp): fails early,
 * naming out, for a missing directory, a directory as out, a read-only place. */
int image_out_check(const char *out, mtc_error_t *err);
/* Run argv; on a non-zero exit err gets "what: <the tool's last line>". When
 * out is set it gets stdout (caller frees; stderr is then only read for err).
 * 0, or -1. */
int image_tool(char *const argv[], const char *what, char **out, mtc_error_t *err);
/* rel (relative to root) as a directory with mode, made when missing: -1 with
 * err when it or a parent is a symlink or not a directory (an image must not
 * lead a write outside root). */
int image_root_dir(const char *root, const char *rel, mode_t mode, mtc_error_t *err);
/* 1 when a component of rel under root, up to and excluding its last one, is a
 * symlink (or not a directory), else 0. Missing components count as fine. */
int image_parent_unsafe(const char *root, const char *rel);
/* Write /.mtc/image.json (meta) into root, and /etc/environment from meta's
 * "env" unless keep_env (a directory import keeps its own). 0, or -1 with err. */
int image_write_config(const char *root, const json_t *meta, int keep_env, mtc_error_t *err);
/* mksquashfs root → out.tmp → rename to out (out.tmp removed on failure);
 * procs > 0: with -processors procs (ENROOT_MAX_PROCESSORS). */
int image_squash(const char *root, const char *out, unsigned procs, mtc_error_t *err);

#endif
