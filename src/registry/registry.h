/* registry: the model registry's files and names — model names, version
 * references (NAME, NAME@3, NAME@alias) and alias rules, artifact formats, the
 * content-addressed store under <home>/models (blobs/sha256/<hex>, one
 * directory of hard links per version), format conversion through mtc-train,
 * and registry_resolve, the one call a consumer (mtc-serve) needs to turn a
 * reference into a directory. Depends on common and jansson only (no SQLite):
 * mtcd keeps the records in its store and mirrors each model's versions and
 * aliases into <home>/models/refs/<project>/<location>/<name>.json, which
 * registry_resolve reads. */
#ifndef MTC_REGISTRY_H
#define MTC_REGISTRY_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "schema/schema.h"

/* Artifact formats: mtc-train's checkpoint (a step_ directory: meta.json,
 * config.json, params.bin, DONE), Hugging Face (model.safetensors +
 * config.json [+ tokenizer.json]), llm.c's GPT-2 .bin. */
enum registry_format { REGISTRY_NATIVE, REGISTRY_HF, REGISTRY_LLMC };
extern const struct schema_enum registry_format_enum; /* "native", "hf", "llmc" */

/* Model names: [a-z][a-z0-9-]{0,62} after registry_name_from (experiment
 * names are mapped onto it). 1 when valid. */
#define REGISTRY_NAME_MAX 63
int registry_name_valid(const char *name);
/* "model name \"x\": must match ..." into err; -1, errno EINVAL. */
int registry_name_error(const char *name, mtc_error_t *err);
/* The model name an experiment registers under: lowercase, '_' and '.' as
 * '-', a leading digit prefixed with "m-", cut to 63, trailing '-' dropped,
 * into out[REGISTRY_NAME_MAX + 1]. 0, or -1 when nothing valid remains. */
int registry_name_from(const char *experiment, char out[REGISTRY_NAME_MAX + 1]);

/* Version aliases, as the cloud checks them: [a-z][a-z0-9-]{0,126}, not a
 * number. 1 when valid. */
#define REGISTRY_ALIAS_MAX 127
int registry_alias_valid(const char *alias);

/* A parsed reference NAME[@SELECTOR]: version > 0 for NAME@3, alias set for
 * NAME@prod, neither for NAME (the "default" alias). */
struct registry_ref {
    char name[REGISTRY_NAME_MAX + 1];
    int version;
    char alias[REGISTRY_ALIAS_MAX + 1];
};
/* 0, or -1 + err naming what is wrong ("model reference \"x@\": ..."). */
int registry_ref_parse(const char *ref, struct registry_ref *out, mtc_error_t *err);

/* ---- artifacts (files under <home>/models) ---- */

/* An upload's source, opened once (DESIGN.md, "Security model"): its format,
 * the directory its files are in (-1 for an llm.c file) and each file to
 * store, opened with fsafe's mtc_reach (as the caller's user, beneath the
 * roots, no link followed): what is hashed and stored is read from these
 * descriptors, nothing by path again. */
#define REGISTRY_SOURCE_FILES 64
struct registry_source {
    int format;
    char path[PATH_MAX]; /* what is stored, as named: the step directory or llm.c file */
    int dir;
    int n;
    struct {
        char name[256];
        int fd;
    } files[REGISTRY_SOURCE_FILES];
};
/* Open src: for NATIVE a step_ directory or a checkpoint root (its newest
 * complete step_), for HF a directory with model.safetensors and
 * config.json, for LLMC a .bin file (or a directory holding exactly one);
 * format < 0: detect it. 0, or -1 + errno (EACCES not for this caller or a
 * symbolic link, ENOENT missing, EINVAL no model) + err ("source: /x: no
 * model.safetensors ..."). registry_source_close closes what it opened. */
int registry_source_open(const char *src, const struct mtc_reach *how, int format,
                         struct registry_source *s, mtc_error_t *err);
void registry_source_close(struct registry_source *s);
/* Add fd (taken) as the file name; -1 (E2BIG) when full. */
int registry_source_add(struct registry_source *s, const char *name, int fd);
/* The run's tokenizer goes with the weights (mtc-serve reads it there) when
 * the source has none: tokenizer (a path, may be NULL), else the one the
 * checkpoint's meta.json names, opened as how allows (none it may read:
 * left out). 0, or -1 when s is full. */
int registry_source_tokenizer(struct registry_source *s, const char *tokenizer,
                              const struct mtc_reach *how);
/* Store s's files under models: each file's bytes copied once from its
 * descriptor while hashed, kept as blobs/sha256/<hex> (read-only; one there
 * already is the same bytes), then a new directory of hard links to them,
 * versions/<random>/. *manifest (caller owns) gets {"format", "dir",
 * "files":[{"path","sha256","size"}], "digest" (of the file list),
 * "sizeBytes"}. 0, or -1 + err. */
int registry_ingest_source(const char *models, const struct registry_source *s,
                           json_t **manifest, mtc_error_t *err);

/* The same by path, as root (tests, tools): registry_detect fills real (the
 * directory or file stored) and *format; registry_ingest stores real with
 * tokenizer, beneath roots (NULL: anywhere) when given. */
int registry_detect(const char *src, int *format, char *real, size_t len, mtc_error_t *err);
int registry_ingest(const char *models, const char *real, int format, const char *tokenizer,
                    const char *const *roots, json_t **manifest, mtc_error_t *err);

/* Remove a version's directory (manifest "dir", which must lie in
 * models/versions) and every blob of it no other version links to, and the
 * conversions made from it. 0/-1 + err (what could not be removed). */
int registry_remove(const char *models, const json_t *manifest, mtc_error_t *err);

/* After a crash, before anything else uses models: empty its temporary
 * areas, remove version directories that dirs (a JSON array of every stored
 * version's manifest "dir") does not name, and every blob no version links
 * to. *removed counts what went. 0, or -1 + err (what could not go). */
int registry_sweep(const char *models, const json_t *dirs, int *removed, mtc_error_t *err);

/* The artifact of manifest in format: its own directory when it is in that
 * format, else a conversion made by trainer (mtc-train export/import) into
 * models/converted/<digest>-<format> once and kept. The directory (or, for
 * LLMC, the .bin file) into out. 0, or -1 + err. */
int registry_materialize(const char *models, const json_t *manifest, int format,
                         const char *trainer, char *out, size_t len, mtc_error_t *err);

/* Copy an artifact (a directory's regular files, or an llm.c file) into dir
 * (made with its parents: mtcd's own places only), as root; files there are
 * replaced. 0, or -1 + err. */
int registry_copy_artifact(const char *src, const char *dir, mtc_error_t *err);
/* Copy the artifact of manifest, in format, into dir for a request: dir
 * opened as how allows (fsafe's mtc_reach_open, made when missing), each
 * file written as how->as through a new name renamed over the old (a link
 * there is replaced, never followed). 0, or -1 + errno + err ("outputDir:
 * ..." when dir is refused: EACCES, EPERM, ENOENT, ENOTDIR). */
int registry_export(const char *models, const json_t *manifest, int format, const char *trainer,
                    const char *dir, const struct mtc_reach *how, mtc_error_t *err);

/* ---- refs files: the mirror registry_resolve reads ---- */

/* Write models/refs/<project>/<location>/<name>.json:
 * {"versions":{"1":manifest,...},"aliases":{"default":1,...}} atomically;
 * versions NULL or empty removes it. 0/-1 + errno. */
int registry_refs_write(const char *models, const char *project, const char *location,
                        const char *name, const json_t *versions, const json_t *aliases);

/* Resolve a reference (NAME, NAME@N, NAME@alias) of projects/local/locations/
 * local (project, location NULL) or of the given ones, registered under home
 * ($MTC_HOME), to its artifact in format (< 0: as stored) into out[len]: a
 * directory, or for LLMC the .bin file. trainer: mtc-train for conversions
 * (NULL: the one next to the running program, else none). 0, or -1 + err
 * ("model tiny@prod: no such alias (aliases: default, staging)"), errno
 * ENOENT for an unknown model, version or alias. Thread-safe; reads only
 * files, so it works without mtcd. */
int registry_resolve(const char *home, const char *project, const char *location, const char *ref,
                     int format, const char *trainer, char *out, size_t len, mtc_error_t *err);

/* The version number ref names now (NAME@prod -> 3) into *version: for
 * lineage, which records the version, not the alias. 0, or -1 + err as
 * registry_resolve. */
int registry_resolve_version(const char *home, const char *project, const char *location,
                             const char *ref, int *version, mtc_error_t *err);
/* The same, with the aliases pointing at that version now ("default" among
 * them when it does) as a JSON array of names (caller decrefs). NULL + err as
 * registry_resolve. */
json_t *registry_version_aliases(const char *home, const char *project, const char *location,
                                 const char *ref, int *version, mtc_error_t *err);

#endif
