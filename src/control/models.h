/* control models: a model's UPLOAD operation (begun in ops.c, run by
 * upload.c), the registry's refs files rewritten from the store, and the
 * lock every change of a model holds (upload.c). */
#ifndef MTC_CONTROL_MODELS_H
#define MTC_CONTROL_MODELS_H

#include "control/control.h"

/* Record op, a model's UPLOAD (op->target "models/NAME", op->request
 * {"modelId", "model": the canonical Model of the request, "restricted": true
 * when its files must lie under the roots, "home": mtcd's home}), unless
 * another operation runs on that model (-1, EBUSY, busy gets its id), and
 * start it. err says why. */
int control_model_begin(struct control *c, const struct store_op *op, char busy[48],
                        mtc_error_t *err);
/* Rewrite the refs file (registry_refs_write) of project/location/name under
 * models from the store; dirs (may be NULL) gets its versions' directories.
 * Callers that change a model hold control_models_lock around the change and
 * this rewrite, so refs files are written in the order of the changes. */
void control_model_refs(struct store *st, const char *models, const char *project,
                        const char *location, const char *name, json_t *dirs);
void control_models_lock(void);
void control_models_unlock(void);

#endif
