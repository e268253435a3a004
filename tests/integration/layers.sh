#!/usr/bin/env bash
# layers: every #include between src/ folders points down the layer order
# (docs/design-notes.md, "Layers") and no provider includes a sibling
# provider's header — scripts/check-layers on this tree, and on copies with
# one violation of each kind planted, which it must name.
. "$(dirname "$0")/lib.sh"

out=$("$ROOT/scripts/check-layers" 2>&1)
rc=$?
check "the tree's includes point down the layers (check-layers: ${out:-nothing to say})" [ "$rc" -eq 0 ]

mkdir -p "$T_DIR/t1" "$T_DIR/t2"
cp -r "$ROOT/src" "$T_DIR/t1/src"
echo '#include "api/api.h"' >>"$T_DIR/t1/src/store/store.c"
out=$("$ROOT/scripts/check-layers" "$T_DIR/t1" 2>&1)
rc=$?
check "a store file including api/ is named ($out)" \
    eval '[ "$rc" -eq 1 ] && grep -q "src/store/store.c: includes api/api.h" <<<"$out"'

cp -r "$ROOT/src" "$T_DIR/t2/src"
echo '#include "provider/local.h"' >>"$T_DIR/t2/src/provider/hosts.c"
out=$("$ROOT/scripts/check-layers" "$T_DIR/t2" 2>&1)
rc=$?
check "the hosts provider including local.h is named ($out)" \
    eval '[ "$rc" -eq 1 ] && grep -q "src/provider/hosts.c: includes provider/local.h (a sibling provider" <<<"$out"'

done_testing
