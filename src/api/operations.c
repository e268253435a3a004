/* operations: long-running operations as the API answers them — a handler's
 * reply with the operation it started (api_reply_op) and GET …/operations/OP
 * (a registrar token reads its own model's uploads only). */
#include "api/internal.h"

#include <errno.h>
#include <string.h>

int api_reply_op(struct api_req *r, struct api_resp *out, const char *op_id)
{
    struct store_op op;
    if (store_op_get(r->st, op_id, &op) < 0)
        return api_error(out, 500, "operation %s vanished", op_id);
    out->body = api_op_json(r->st, r->prov, &op);
    store_op_release(&op);
    return 0;
}

int api_op_get(struct api_req *r, struct api_resp *out)
{
    if (api_check_parent(r, out) < 0)
        return 0;
    if (strncmp(r->cap[2], "op-", 3) != 0 || strlen(r->cap[2]) > 40)
        return api_error(out, 400, "operation id \"%.40s\": not an operation id", r->cap[2]);
    struct store_op op;
    if (store_op_get(r->st, r->cap[2], &op) < 0)
        return api_error(out, errno == ENOENT ? 404 : 500, "operation %s %s", r->cap[2],
                         errno == ENOENT ? "not found" : "cannot be read");
    if (strcmp(op.project, r->cap[0]) != 0 || strcmp(op.location, r->cap[1]) != 0) {
        store_op_release(&op);
        return api_error(out, 404, "operation %s not found", r->cap[2]);
    }
    /* a registrar reads its model's uploads only */
    if (api_registrar_model(r, out, strncmp(op.target, "models/", 7) ? NULL : op.target + 7) < 0) {
        store_op_release(&op);
        return 0;
    }
    out->body = api_op_json(r->st, r->prov, &op);
    store_op_release(&op);
    return 0;
}
