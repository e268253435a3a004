/* dset_internal: what dset.c (the cache, the CLI) shares with dset_src.c (reading a
 * source into parts, fingerprinting it, validating its records). Not an interface. */
#ifndef MTC_TRAIN_DSET_INTERNAL_H
#define MTC_TRAIN_DSET_INTERNAL_H

#include "train/data.h"

enum dset_fmt { DSET_TXT, DSET_JSONL, DSET_CSV };

/* One file of a source. role: "train", "validation", "test" (a Hugging Face split), or ""
 * (the whole source: prepare carves the validation split out of it). */
struct dset_part {
    char name[512]; /* in errors: the path as given, or DIR's split file's name */
    char role[16];
    enum dset_fmt fmt;
    char *data; /* NUL-terminated, owned */
    size_t len;
};
struct dset_source {
    struct dset_part *parts; /* owned */
    size_t n;
    size_t bytes;
    const char *builtin; /* the generator's name (borrowed from the source string) or NULL */
    char fp[72];         /* "sha256:<hex>" of every part's role, format and content */
};
/* Read src (a file, a directory, builtin:<generator>) into s; fd above 2: src is open as
 * fd already (a file read from it, a directory's files opened beneath it as `as`, no link
 * followed: struct dset_options). 0, or -1 with err naming the problem (missing, empty,
 * unsupported, unknown generator). Release with dset_source_release even on failure. */
int dset_source_load(const char *src, int fd, const struct mtc_user *as, struct dset_source *s,
                     mtc_error_t *err);
void dset_source_release(struct dset_source *s);

/* Records of one part for kind, validated and normalized: for pretrain each is
 * {"text"} (a .txt part is one record); sft {"prompt","response"} or {"messages"}; dpo
 * {"prompt","chosen","rejected"}; rl {"prompt","answer"}. Appended to *v (new references).
 * 0, or -1 with err "name:line: why" (or "name: why"). */
struct dset_records {
    json_t **v;
    size_t n, cap;
};
int dset_part_records(const struct dset_part *p, enum dset_kind kind, struct dset_records *out,
                      mtc_error_t *err);
void dset_records_release(struct dset_records *r);

/* "sha256:<hex>" of len bytes into out[72]. */
void dset_sha256(const void *data, size_t len, char out[72]);

#endif
