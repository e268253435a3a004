/* dataset: what mtc knows about a dataset wherever it is kept — its kinds, its
 * name pattern, the field tables of the API's request body and of the record
 * `mtc-train data prepare --json` prints, and where a source may lie. Pure:
 * mtcd (API, operation runner) and the CLI link it alike. */
#ifndef MTC_DATASET_H
#define MTC_DATASET_H

#include <jansson.h>
#include <stddef.h>

#include "common/common.h"
#include "schema/schema.h"

/* A dataset's kind: what its records are (pretraining text, chat SFT,
 * preference pairs, prompts with verifiable answers). Names as mtc-train's
 * --kind takes them: "pretrain", "sft", "dpo", "rl". */
enum dataset_kind { DATASET_PRETRAIN, DATASET_SFT, DATASET_DPO, DATASET_RL };
extern const struct schema_enum dataset_kind_enum;

/* A dataset's state: PREPARING while an operation prepares it, READY once a
 * version exists and nothing runs (names in dataset_state_enum). */
enum dataset_state { DATASET_PREPARING, DATASET_READY };
extern const struct schema_enum dataset_state_enum;

/* Dataset names: [a-z][a-z0-9-]{0,62} (no trailing '-'), like project names;
 * one reaches mtc-train's command line and the cache's record. 1 when valid. */
#define DATASET_NAME_MAX 63
int dataset_name_valid(const char *name);
/* The error text for an invalid name, "dataset name \"x\": must match …", into err; -1. */
int dataset_name_error(const char *name, mtc_error_t *err);

/* The request body of a create ({source, kind, tokenizer, description,
 * labels}; source and kind required) or of a :prepare (every field optional:
 * what is absent stays as stored). snake_case or camelCase; unknown fields,
 * a bad kind, a relative path or a malformed builtin name are errors naming
 * the field. Canonical camelCase object (caller owns), or NULL + err. */
json_t *dataset_request_normalize(const json_t *body, int create, mtc_error_t *err);
extern const struct schema dataset_create_schema, dataset_prepare_schema;

/* "builtin:NAME" (a generator built into mtc-train): 1, else 0. */
int dataset_is_builtin(const char *source);

/* A request's source or tokenizer (field names it in messages) opened as
 * `as` (fsafe's mtc_reach_open, walked once: NULL = root, for an admin):
 * the absolute path with "." and ".." folded by name; with roots
 * (NULL-terminated; NULL = anywhere, an admin) it must lie beneath one of
 * them by name — checked before the filesystem is touched — and beneath it
 * no symbolic link is followed. A regular file or a directory (O_RDONLY,
 * O_CLOEXEC; never a FIFO or a device): an fd (caller closes), or -1 with
 * errno EACCES (outside the roots, a link on the way, or one `as` may not
 * read: "FIELD: cannot read PATH as user U"), ENOENT, EINVAL, and a
 * one-line err naming the field. */
int dataset_open(const char *field, const char *path, const char *const *roots,
                 const struct mtc_user *as, mtc_error_t *err);

/* The JSON object `mtc-train data prepare --json` prints on stdout, checked
 * against its field table (key, path, kind, source, sourceFingerprint,
 * tokenizer, tokenizerFingerprint, records, trainTokens, valTokens, bytes,
 * cached; other fields a newer trainer adds are dropped). The key must be a
 * plain file name ([A-Za-z0-9._-], no leading '.') and the path absolute.
 * Canonical object (caller owns) or NULL + err. */
json_t *dataset_prepared_parse(const char *text, mtc_error_t *err);
extern const struct schema dataset_prepared_schema;

/* A version as the API shows it: {"versionId", "createTime", then the
 * record's fields but "cached" (a fact of one preparation, not of the
 * version)}. New reference. */
json_t *dataset_version_json(int version, const json_t *record, int64_t create_ms);
/* A dataset resource: its request fields, state, times, latestVersion and,
 * with_versions, every version (oldest first), from the store (view.c). */
struct store;
struct store_dataset;
json_t *dataset_json(struct store *st, const struct store_dataset *d, int with_versions);

/* A run's reference to a registered dataset, "NAME" (its latest version) or
 * "NAME@VERSION": the name into name[DATASET_NAME_MAX + 1], the version into
 * *version (0: the latest). 0, or -1 + err naming field. */
int dataset_ref_parse(const char *field, const char *ref, char *name, int *version,
                      mtc_error_t *err);
/* The prepared data a run reads for ref: in ds (a dataset resource as the API
 * shows it, with "versions"), the version asked for (*version; 0: the latest,
 * set to its id) must exist, be of kind `kind` (NULL: any) and its data
 * directory exist; its path into path[len]. 0, or -1 + a one-line err
 * ("dataset: chat@3: no such version (chat has 1, 2)"). */
int dataset_pick(const char *field, const json_t *ds, const char *ref, const char *kind, char *path,
                 size_t len, mtc_error_t *err);

#endif
