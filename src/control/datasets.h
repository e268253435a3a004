/* control datasets: a dataset's CREATE and PREPARE operations (begun in
 * ops.c, run by prepare.c), what they run (mtc-train) and where they read
 * and write (shared.c). */
#ifndef MTC_CONTROL_DATASETS_H
#define MTC_CONTROL_DATASETS_H

#include "control/control.h"

/* Datasets: what mtcd's preparations run and where they read and write. */
struct control_datasets {
    const char *trainer;      /* mtc-train (absolute path), or NULL: none found */
    const char *cache_dir;    /* prepared data: mtc-train --cache-dir */
    const char *const *roots; /* NULL-terminated: where a non-admin's source or
                               * tokenizer file may lie */
};
/* Set them (borrowed: they must outlive c); before control_start. */
void control_set_datasets(struct control *c, const struct control_datasets *d);
const struct control_datasets *control_datasets(const struct control *c);

/* Record op, a dataset's CREATE or PREPARE (op->target "datasets/NAME",
 * op->request {"spec": the dataset's canonical request, "restricted": true
 * when its files must lie under the roots}), and start it. For a CREATE the
 * dataset row d is stored with it (-1, EEXIST when the name is taken); a
 * PREPARE needs the dataset (-1, ENOENT) and no operation running on it (-1,
 * EBUSY, busy gets its id). err says why. */
int control_dataset_begin(struct control *c, const struct store_dataset *d,
                          const struct store_op *op, char busy[48], mtc_error_t *err);

#endif
