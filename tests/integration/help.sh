#!/usr/bin/env bash
# help: every program, every mtc command and subcommand, and every mtc-train
# and mtc-agent subcommand answers --help and -h with its usage on stdout and
# exit 0 — and does nothing else: no file appears in $MTC_HOME or the working
# directory, and nothing reaches a mtcd (MTC_URL names a port no one serves,
# so a request would fail the command).
. "$(dirname "$0")/lib.sh"

export MTC_URL=http://127.0.0.1:9 HOME=$T_DIR/user
unset MTC_TOKEN MTC_EXPERIMENT_ROOT
mkdir -p "$HOME" "$T_DIR/cwd"
cd "$T_DIR/cwd" || exit 1

# the names of "  NAME  description" lines after a line matching $1
sub_names() { awk -v after="$1" '$0 ~ after { on = 1; next } on && /^  [a-z]/ { print $1 }'; }
# answers CMD...: CMD --help and CMD -h each exit 0 with something on stdout
answers() {
    local flag out rc
    for flag in --help -h; do
        out=$(timeout 20 "$@" "$flag" 2>"$T_DIR/err" </dev/null)
        rc=$?
        check "$* $flag: exit 0 (got $rc), usage on stdout (${#out} bytes)$([ "$rc" -eq 0 ] || printf ' — %s' "$(head -c 160 "$T_DIR/err")")" \
            [ "$rc" -eq 0 -a -n "$out" ]
    done
}

for prog in mtc mtcd mtc-agent mtc-train mtc-serve mtc-scan mtc-power mtc-simload; do
    if command -v "$prog" >/dev/null; then answers "$prog"; else nok "$prog is built (in $B/bin)"; fi
done

# mtc: each command, then each subcommand its --help lists
cmds=$(mtc --help 2>/dev/null | sub_names '^commands:')
check "mtc --help lists commands ($(wc -w <<<"$cmds"))" [ -n "$cmds" ]
for c in $cmds; do
    answers mtc "$c"
    for s in $(mtc "$c" --help 2>/dev/null | sub_names '^commands:'); do
        answers mtc "$c" "$s"
    done
done

# mtc-train and mtc-agent: each subcommand their --help lists
subs=$(mtc-train --help 2>/dev/null | sub_names '^usage:')
check "mtc-train --help lists subcommands ($(wc -w <<<"$subs"))" [ -n "$subs" ]
for s in $subs; do answers mtc-train "$s"; done
subs=$(mtc-agent --help 2>/dev/null | sub_names '^usage:')
check "mtc-agent --help lists subcommands ($(wc -w <<<"$subs"))" [ -n "$subs" ]
for s in $subs; do answers mtc-agent "$s"; done

# nothing was made, nothing was started
left=$(find "$MTC_HOME" "$T_DIR/cwd" "$HOME" -mindepth 1 2>/dev/null | head -5 | tr '\n' ' ')
check "--help left no file behind${left:+ — found: $left}" [ -z "$left" ]
check "--help started no mtcd (no mtcd.pid)" [ ! -e "$MTC_HOME/mtcd.pid" ]

# the check itself: a subcommand that takes --help for an error is caught
out=$(mtc experiment status --no-such-flag 2>/dev/null)
rc=$?
check "a usage error is told apart (exit $rc, ${#out} bytes on stdout)" [ "$rc" -ne 0 -a -z "$out" ]

done_testing
