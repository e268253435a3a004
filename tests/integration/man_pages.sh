#!/usr/bin/env bash
# man_pages: the pages under man/ render with no warning (groff -ww) and open
# with `man -l`, and each names every long option its program's --help prints
# (mtc: each command's and subcommand's too) — the pages and --help are two
# sources, so a new flag without a man entry fails here.
. "$(dirname "$0")/lib.sh"

MANDIR=$ROOT/man
PAGES=(mtc.1 mtcd.8 mtc-agent.8 mtc-train.1 mtc-serve.1 mtc-scan.8 mtc-power.8 mtc-simload.1)

# 1. each page renders
for p in "${PAGES[@]}"; do
    f=$MANDIR/$p
    if [ ! -f "$f" ]; then
        nok "$p exists"
        continue
    fi
    if command -v groff >/dev/null; then
        warn=$(groff -man -ww -z -Tutf8 "$f" 2>&1 >/dev/null)
        check "$p: groff -man -ww says nothing (${warn:-no warning})" [ -z "$warn" ]
    else
        skip "$p: groff is not installed (Debian package groff-base)"
    fi
    if command -v man >/dev/null; then
        out=$(MANWIDTH=80 man -l "$f" 2>&1 </dev/null)
        rc=$?
        check "$p: man -l exits 0 (got $rc) with its NAME section" \
            eval '[ "$rc" -eq 0 ] && grep -q "^NAME" <<<"$out"'
    else
        skip "$p: man is not installed (Debian package man-db)"
    fi
done

# 2. every long option of --help is in the page
# long options in text: --name (a lowercase letter, then letters, digits, -)
long_opts() { grep -oE -- '--[a-z][a-z0-9-]*' | sed 's/-*$//' | sort -u; }
# the options a page names: comments (.\" ...) go, \- is a hyphen, font
# changes (\fB...\fR) go
page_opts() { sed -e '/^\.\\"/d' -e 's/\\".*//' -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$MANDIR/$1" | long_opts; }
# help CMD...: what CMD --help prints on stdout; every program and
# subcommand answers --help with exit 0 there (help.sh): one that does not
# is named in $T_DIR/help-failed, which a check below reads
help_text() {
    local out
    if out=$(timeout 20 "$@" --help 2>/dev/null </dev/null) && [ -n "$out" ]; then
        printf '%s\n' "$out"
    else
        echo "$* --help" >>"$T_DIR/help-failed"
        return 1
    fi
}
# names: the first words of "  NAME  description" lines after a "commands:"
# line (mtc and its commands) or after "usage:" (mtc-train)
sub_names() { awk -v after="$1" '$0 ~ after { on = 1; next } on && /^  [a-z]/ { print $1 }'; }
# in_page PAGE WHAT CMD...: CMD's help names no option PAGE lacks
in_page() {
    local page=$1 what=$2 missing
    shift 2
    missing=$(comm -23 <(help_text "$@" | long_opts) <(page_opts "$page") | tr '\n' ' ' | sed 's/ $//')
    check "$page names every option of $what${missing:+ — missing: $missing}" [ -z "$missing" ]
}
# in_page_text PAGE WHAT TEXT: as in_page, for a help text already gathered
in_page_text() {
    local page=$1 what=$2 text=$3 missing
    missing=$(comm -23 <(long_opts <<<"$text") <(page_opts "$page") | tr '\n' ' ' | sed 's/ $//')
    check "$page names every option of $what${missing:+ — missing: $missing}" [ -z "$missing" ]
}

for prog in mtc mtcd mtc-agent mtc-train mtc-serve mtc-scan mtc-power mtc-simload; do
    command -v "$prog" >/dev/null || { nok "$prog is built (in $B/bin)"; }
done

in_page mtc.1 "mtc --help (global options)" mtc
in_page mtcd.8 "mtcd --help" mtcd
in_page mtc-agent.8 "mtc-agent --help" mtc-agent
in_page mtc-serve.1 "mtc-serve --help" mtc-serve
in_page mtc-scan.8 "mtc-scan --help" mtc-scan
in_page mtc-power.8 "mtc-power --help" mtc-power
in_page mtc-simload.1 "mtc-simload --help" mtc-simload

# mtc: each command, with its subcommands' help gathered into one check
cmds=$(help_text mtc | sub_names '^commands:')
check "mtc --help lists commands ($(echo $cmds | wc -w))" [ -n "$cmds" ]
for c in $cmds; do
    text=$(help_text mtc "$c")
    for s in $(sub_names '^commands:' <<<"$text"); do
        text+=$'\n'$(help_text mtc "$c" "$s")
    done
    in_page_text mtc.1 "mtc $c --help and its subcommands'" "$text"
done

# mtc-train: train (the default) and each subcommand
subs=$(help_text mtc-train | sub_names '^usage:')
check "mtc-train --help lists subcommands ($(echo $subs | wc -w))" [ -n "$subs" ]
text=$(help_text mtc-train)
for s in $subs; do text+=$'\n'$(help_text mtc-train "$s"); done
in_page_text mtc-train.1 "mtc-train --help and its subcommands'" "$text"
hf=$(tr '\n' ';' <"$T_DIR/help-failed" 2>/dev/null)
check "every --help read above exited 0 with its usage on stdout${hf:+ — not: $hf}" [ -z "$hf" ]

# the check itself: a copy of mtc-serve.1 without --dtype (named only in a
# comment) fails, naming it
sed -e '/dtype/s/\\-\\-dtype/dtype/g' -e '1i .\\" --dtype' \
    "$MANDIR/mtc-serve.1" >"$T_DIR/mtc-serve.1"
missing=$(MANDIR=$T_DIR; comm -23 <(help_text mtc-serve | long_opts) <(page_opts mtc-serve.1) | tr '\n' ' ' | sed 's/ $//')
check "a page without --dtype is caught (missing: ${missing:-nothing})" [ "$missing" = "--dtype" ]

done_testing
