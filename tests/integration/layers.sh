#!/usr/bin/env bash
# layers: every #include between src/ folders points down the layer order
# (docs/design-notes.md, "Layers") and no provider includes a sibling
# provider's header — scripts/check-layers on this tree, and on copies with
# one violation of each kind planted, which it must name; and inside each
# module no file circle (scripts/check-circles on the build's objects, and on
# a module of two files that call each other, built here, which it must name).
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

out=$("$ROOT/scripts/check-circles" "$ROOT/build" "$ROOT" 2>&1)
rc=$?
sed 's/^/# /' <<<"$out"
check "no file circle inside any module (check-circles: exit $rc)" [ "$rc" -eq 0 ]

# a module "demo" whose a.c calls b.c and b.c calls a.c back; z.c calls neither
mkdir -p "$T_DIR/t3/src/demo" "$T_DIR/t3/build/src/demo"
printf 'int b(void);\nint a(void) { return b(); }\n' >"$T_DIR/t3/src/demo/a.c"
printf 'int a(void);\nint b(void) { return 1; }\nint c(void) { return a(); }\n' >"$T_DIR/t3/src/demo/b.c"
printf 'int b(void);\nint z(void) { return b(); }\n' >"$T_DIR/t3/src/demo/z.c"
for f in a b z; do cc -c "$T_DIR/t3/src/demo/$f.c" -o "$T_DIR/t3/build/src/demo/$f.o"; done
out=$("$ROOT/scripts/check-circles" "$T_DIR/t3/build" "$T_DIR/t3" 2>&1)
rc=$?
check "a circle between two files is named, with a symbol of each call ($out)" \
    eval '[ "$rc" -eq 1 ] && [ "$out" = "demo: circle a b (a -> b: b, b -> a: a)" ]'

done_testing
