#!/usr/bin/env bash
# Rebuilds the image's runtime layout on this Debian host and drives it, since no
# container engine runs here: the same install script (runtime group), the same
# unprivileged user, the same home and state directories, the same environment,
# the same entrypoint (deskenv init, tini, then deskenv) and the same health check command as
# the Dockerfile. Then it checks /health, takes one MCP screenshot over plain
# HTTP (curl + JSON-RPC), stops the appliance with SIGTERM and checks that no
# process is left. It undoes everything it created on the way out: the user
# (only if it made it), directories, the binary.
#
#   sudo scripts/check-runtime.sh [options]
#
#   --user NAME        the image's user (default desk)
#   --uid N            its uid when it has to be created, if free (default 1000)
#   --home DIR         its home and the desktop's home (default /home/NAME)
#   --workdir DIR      state directory, the image's WORKDIR (default /var/lib/deskenv)
#   --env KEY=VALUE    the image's environment; repeat. Given once, replaces the
#                      defaults below entirely (deploy/deploy_test.go passes the
#                      Dockerfile's own ENV lines)
#   --addr HOST:PORT   where to listen (default 127.0.0.1:18080; never beyond
#                      this machine, whatever the image says)
#   --udp-port N       WebRTC UDP port (default 18443)
#   --bin FILE         use this deskenv binary instead of building one
#   --browser-task ID  reset into this task, which must open Chromium (default
#                      browser-about, from the repo's tasks/); "" skips it
#   --own-user         the user exists and belongs to this check (a throwaway
#                      root filesystem built from the Dockerfile): use its home
#                      as it is, count all its processes as this run's, and
#                      keep it
#   --keep             leave the user, directories and binary in place
#
# Needs root: it creates a user and runs a process as that user. Exits 0 when
# every check passed; otherwise prints what failed, and the appliance's log.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
user=desk uid=1000 home="" workdir=/var/lib/deskenv addr=127.0.0.1:18080 udp_port=18443 bin="" keep=0
browser_task=browser-about own_user=0
envs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --user) user="$2"; shift 2 ;;
    --uid) uid="$2"; shift 2 ;;
    --home) home="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --addr) addr="$2"; shift 2 ;;
    --udp-port) udp_port="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --browser-task) browser_task="$2"; shift 2 ;;
    --own-user) own_user=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "check-runtime: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
home="${home:-/home/$user}"
if [ ${#envs[@]} -eq 0 ]; then
  # The Dockerfile's ENV, for running this script by hand.
  envs=(HOME="$home" LANG=C.UTF-8 DESKENV_HOME="$home" DESKENV_TASKS=/usr/share/deskenv/tasks
        DESKENV_EPISODES="$workdir/episodes" DESKENV_UDP_PORT=8443 DESKENV_LOG_FORMAT=json)
fi

say() { echo "check-runtime: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  say "FAIL: must run as root: it creates the user '$user' and runs deskenv as that user, as the image does (try: sudo $0)"
  exit 2
fi
case "$addr" in
  127.*|localhost:*|\[::1\]:*) ;;
  *) fail "--addr $addr: this check listens on loopback only (127.x.x.x, localhost or [::1])" ;;
esac

# Everything made here is undone on exit, in reverse order.
undo=()
app_pid=""
# Not DESKENV_: deskenv keeps its own variables out of the desktop's programs,
# and the marker must reach them.
marker="CHECK_RUNTIME_RUN=$$-$RANDOM$RANDOM"
tmp="$(mktemp -d /tmp/deskenv-check.XXXXXX)"
chmod 0755 "$tmp"
undo+=("rm -rf '$tmp'")

# leftovers lists the processes of this run still alive: every process of the
# user when this script created it, else those carrying this run's marker in
# their environment (desktop apps inherit deskenv's environment).
leftovers() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(stat -c %u "$p" 2>/dev/null)" = "$run_uid" ] || continue
    if [ "$created_user" = 1 ] || tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx "$marker"; then
      echo "${p#/proc/} $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null | cut -c1-80)"
    fi
  done
}

cleanup() {
  local rc=$?
  set +e
  if [ -n "$app_pid" ] && kill -0 "$app_pid" 2>/dev/null; then
    kill -TERM "$app_pid"; sleep 2; kill -KILL "$app_pid" 2>/dev/null
  fi
  if [ -n "${run_uid:-}" ]; then
    local left; left="$(leftovers)"
    if [ -n "$left" ]; then
      say "killing what this run left behind:"; echo "$left" >&2
      echo "$left" | while read -r pid _; do kill -KILL "$pid" 2>/dev/null; done
    fi
  fi
  if [ $rc -ne 0 ] && [ -s "$tmp/deskenv.log" ]; then
    say "the appliance's log (last 40 lines):"; tail -n 40 "$tmp/deskenv.log" >&2
  fi
  if [ "$keep" = 1 ]; then
    say "--keep: leaving user, directories and $tmp in place"
  else
    local i
    for ((i=${#undo[@]}-1; i>=0; i--)); do eval "${undo[$i]}" || say "cleanup step failed: ${undo[$i]}"; done
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. Packages: the same script and group as the image's runtime stage.
"$repo/scripts/install-deps.sh" runtime
for cmd in Xvfb openbox xterm tini curl setpriv; do
  command -v "$cmd" >/dev/null || fail "$cmd is not installed (install-deps.sh runtime should have brought it, curl and setpriv come with Debian)"
done
command -v jq >/dev/null || fail "jq is needed to read JSON-RPC answers: apt-get install jq"

# 2. The user, as the Dockerfile makes it.
created_user=0
if [ "$own_user" = 1 ]; then
  id "$user" >/dev/null 2>&1 || fail "--own-user: there is no user '$user'"
  [ -d "$home" ] || fail "--own-user: $user's home $home does not exist"
  created_user=1 # for the checks: every process and file of the user is this run's
  say "using the image's user '$user' (uid $(id -u "$user")) and its home $home"
elif id "$user" >/dev/null 2>&1; then
  say "user '$user' exists already: using it, and leaving it in place"
  if [ "$home" = "/home/$user" ] && [ -d "$home" ]; then
    # Someone's real home: the desktop must not litter it.
    home="$tmp/home"
    install -d -o "$user" -g "$(id -gn "$user")" -m 0755 "$home"
    say "using $home as the desktop's home, not $user's own"
    envs=("${envs[@]/#HOME=*/HOME=$home}")
    envs=("${envs[@]/#DESKENV_HOME=*/DESKENV_HOME=$home}")
  fi
else
  [ -e "$home" ] && fail "$home exists but user '$user' does not: remove it or pass --home"
  uid_opt=()
  if getent passwd "$uid" >/dev/null || getent group "$uid" >/dev/null; then
    say "uid/gid $uid is taken on this host ($(getent passwd "$uid" | cut -d: -f1)): letting useradd pick one (the image uses $uid)"
  else
    uid_opt=(--uid "$uid" --gid "$uid")
    groupadd --gid "$uid" "$user"
    undo+=("groupdel '$user' 2>/dev/null || true")
  fi
  if [ ${#uid_opt[@]} -eq 0 ]; then
    useradd --user-group --create-home --home-dir "$home" --shell /bin/bash "$user"
  else
    useradd "${uid_opt[@]}" --create-home --home-dir "$home" --shell /bin/bash "$user"
  fi
  created_user=1
  undo+=("userdel --remove '$user' 2>/dev/null; rm -rf '$home'")
  say "created user '$user' (uid $(id -u "$user")) with home $home"
fi
run_uid="$(id -u "$user")"
run_gid="$(id -g "$user")"

# 3. Directories, owned as in the image.
mkdir_owned() { # dir owner
  if [ ! -e "$1" ]; then
    install -d -o "$2" -g "$2" -m 0755 "$1"
    undo+=("rm -rf '$1'")
  fi
}
mkdir_owned "$workdir" "$user"
mkdir_owned "$workdir/episodes" "$user"
[ -w "$workdir" ] || fail "$workdir is not writable"
for kv in "${envs[@]}"; do
  if [ "${kv%%=*}" = DESKENV_TASKS ] && [ ! -e "${kv#*=}" ]; then
    parent="$(dirname "${kv#*=}")"
    [ -e "$parent" ] || { mkdir -p "$parent"; undo+=("rm -rf '$parent'"); }
    cp -r "$repo/tasks" "${kv#*=}"
    chmod -R a+rX "${kv#*=}"
    undo+=("rm -rf '${kv#*=}'")
  fi
done

# 4. The binary: built as the image's build stage builds it.
if [ -z "$bin" ]; then
  say "building deskenv"
  (cd "$repo" && CGO_ENABLED=1 go build -trimpath -o "$tmp/deskenv" ./cmd/deskenv)
  bin="$tmp/deskenv"
elif ! setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --init-groups test -x "$bin"; then
  # Out of the user's reach (a private build directory): run a copy.
  cp "$bin" "$tmp/deskenv"; bin="$tmp/deskenv"
fi
chmod 0755 "$bin"

# 5. Run it as the user, with only the image's environment, under tini.
as_user=(setpriv --reuid="$run_uid" --regid="$run_gid" --init-groups)
run_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${envs[@]}"
         DESKENV_ADDR="$addr" DESKENV_UDP_PORT="$udp_port" "$marker")
agent_token="agent-$RANDOM$RANDOM$RANDOM"
operator_token="operator-$RANDOM$RANDOM$RANDOM"
run_env+=(DESKENV_AGENT_TOKEN="$agent_token" DESKENV_OPERATOR_TOKEN="$operator_token")
say "starting deskenv as $user (uid $run_uid) on $addr"
(cd "$workdir" && exec "${as_user[@]}" "${run_env[@]}" "$bin" init -- tini -s -- "$bin") >"$tmp/deskenv.log" 2>&1 &
app_pid=$!

url="http://$addr"
ok=0
for _ in $(seq 1 60); do
  kill -0 "$app_pid" 2>/dev/null || fail "deskenv exited during start-up"
  if curl -fsS -m 2 "$url/health" >"$tmp/health.json" 2>/dev/null; then ok=1; break; fi
  sleep 0.5
done
[ $ok = 1 ] || fail "no answer from $url/health after 30 s"
[ "$(jq -r .status "$tmp/health.json")" = healthy ] || fail "/health says $(cat "$tmp/health.json")"
say "ok: /health is healthy"

if printf '%s\n' "${envs[@]}" | grep -q '^DESKENV_TASKS='; then
  grep -q '"msg":"tasks loaded"' "$tmp/deskenv.log" || fail "DESKENV_TASKS is set but the log says no tasks were loaded"
  say "ok: tasks loaded ($(sed -n 's/.*"msg":"tasks loaded".*"count":\([0-9]*\).*/\1/p' "$tmp/deskenv.log") of them)"
fi

# The image's HEALTHCHECK command, as the image's user.
"${as_user[@]}" "${run_env[@]}" "$bin" health --url "$url/health" || fail "deskenv health --url $url/health failed"
say "ok: the HEALTHCHECK command passes"

# Who runs what: deskenv and its X server must both be the user, never root.
deskenv_pid="$(cat /proc/"$app_pid"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -m1 . || true)"
[ -n "$deskenv_pid" ] || fail "tini has no child"
[ "$(stat -c %u "/proc/$deskenv_pid")" = "$run_uid" ] || fail "deskenv (pid $deskenv_pid) does not run as $user"
xvfb=""
# The children files hold PIDs separated by spaces: words, not lines.
# shellcheck disable=SC2013
for c in $(cat /proc/"$deskenv_pid"/task/*/children 2>/dev/null); do
  [ "$(cat "/proc/$c/comm" 2>/dev/null)" = Xvfb ] && xvfb=$c
done
[ -n "$xvfb" ] || fail "deskenv has no Xvfb child"
[ "$(stat -c %u "/proc/$xvfb")" = "$run_uid" ] || fail "Xvfb (pid $xvfb) does not run as $user"
desktop_home="$(printf '%s\n' "${envs[@]}" | sed -n 's/^DESKENV_HOME=//p')"
say "ok: deskenv (pid $deskenv_pid) and Xvfb (pid $xvfb) run as $user"

# The tokens stay out of the agent's reach: the desktop's programs run as the
# same user, so neither deskenv's environment nor theirs may show them.
if "${as_user[@]}" cat "/proc/$deskenv_pid/environ" >/dev/null 2>&1; then
  fail "$user can read deskenv's environment (/proc/$deskenv_pid/environ), tokens included"
fi
# The init (PID 1 in a container) got the tokens and must not show them.
[ "$(cat "/proc/$app_pid/comm")" = tini ] || fail "deskenv init did not become tini (pid $app_pid is $(cat "/proc/$app_pid/comm"))"
if "${as_user[@]}" cat "/proc/$app_pid/environ" | tr '\0' '\n' | grep -q "_TOKEN=\|$agent_token\|$operator_token"; then
  fail "the init's environment (/proc/$app_pid/environ), readable by $user, still holds a token"
fi
n=0
for p in /proc/[0-9]*; do
  tr '\0' '\n' 2>/dev/null < "$p/environ" | grep -qx "$marker" || continue
  # deskenv and its init are the appliance, not the desktop.
  [ "${p#/proc/}" = "$deskenv_pid" ] || [ "${p#/proc/}" = "$app_pid" ] && continue
  if tr '\0' '\n' 2>/dev/null < "$p/environ" | grep -q "^DESKENV_"; then
    fail "$(cat "$p/comm") (pid ${p#/proc/}) on the desktop sees DESKENV_ variables: $(tr '\0' '\n' < "$p/environ" | grep -c '^DESKENV_') of them"
  fi
  n=$((n+1))
done
[ $n -gt 0 ] || fail "no program of the desktop carries this run's marker"
say "ok: no token in the init's environment, $user cannot read deskenv's, and the desktop's $n programs see no DESKENV_ variable"

# 6. One MCP screenshot over streamable HTTP: initialize, initialized, call.
rpc() { # session body -> response body on stdout, headers in $tmp/headers
  local hdr=(-H "Content-Type: application/json" -H "Accept: application/json, text/event-stream"
             -H "Authorization: Bearer $agent_token")
  [ -n "$1" ] && hdr+=(-H "Mcp-Session-Id: $1")
  curl -sS -m 20 -D "$tmp/headers" "${hdr[@]}" --data "$2" "$url/mcp" |
    sed -n 's/^data: //p; /^[[{]/p'
}
code="$(curl -s -o /dev/null -w '%{http_code}' -m 5 -H "Content-Type: application/json" \
  --data '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' "$url/mcp")"
[ "$code" = 401 ] || [ "$code" = 403 ] || fail "/mcp without a token answered $code, want 401 or 403"
say "ok: /mcp refuses a caller without a token ($code)"

rpc "" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"check-runtime","version":"1"}}}' >"$tmp/init.json"
jq -e '.result.serverInfo.name' "$tmp/init.json" >/dev/null || fail "MCP initialize: $(head -c 300 "$tmp/init.json")"
session="$(sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *//p' "$tmp/headers" | tr -d '\r')"
rpc "$session" '{"jsonrpc":"2.0","method":"notifications/initialized"}' >/dev/null
rpc "$session" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"computer","arguments":{"action":"screenshot"}}}' >"$tmp/shot.json"
jq -e '.result.isError != true' "$tmp/shot.json" >/dev/null || fail "screenshot tool error: $(head -c 300 "$tmp/shot.json")"
jq -r '[.result.content[] | select(.type == "image")][0].data // empty' "$tmp/shot.json" | base64 -d >"$tmp/shot.img" 2>/dev/null ||
  fail "screenshot: no decodable image content in $(head -c 300 "$tmp/shot.json")"
[ "$(head -c 8 "$tmp/shot.img" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "screenshot is not a PNG"
size="$(od -An -tu1 -j16 -N8 "$tmp/shot.img" | awk '{printf "%dx%d", $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8}')"
say "ok: MCP screenshot is a $size PNG ($(stat -c %s "$tmp/shot.img") bytes)"

# The browser, as a task starts it: reset into a task that opens a page in
# Chromium and waits for its window. Chromium's helper processes make the
# leftover check below worth having.
if [ -n "$browser_task" ]; then
  code="$(curl -sS -m 120 -o "$tmp/reset.json" -w '%{http_code}' -H "Authorization: Bearer $operator_token" \
    -H "Content-Type: application/json" --data "{\"task_id\":\"$browser_task\"}" "$url/api/reset")"
  [ "$code" = 200 ] || fail "reset into task $browser_task answered $code: $(head -c 400 "$tmp/reset.json")"
  n=0
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = chromium ] || continue
    tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx "$marker" || continue
    [ "$(stat -c %u "$p")" = "$run_uid" ] || fail "chromium (pid ${p#/proc/}) does not run as $user"
    n=$((n+1))
  done
  [ $n -gt 0 ] || fail "task $browser_task is set up but no chromium of this run is found"
  say "ok: task $browser_task opened its page in Chromium ($n processes, all $user's)"
fi

# The desktop's files belong to the user.
if [ -n "$desktop_home" ] && [ -d "$desktop_home" ]; then
  bad="$(find "$desktop_home" ! -uid "$run_uid" -print -quit)"
  [ -z "$bad" ] || fail "$bad in the desktop's home is not owned by $user"
  say "ok: everything under $desktop_home belongs to $user"
fi

# 7. Stop it as a container engine would, and look for leftovers.
kill -TERM "$app_pid"
for _ in $(seq 1 40); do kill -0 "$app_pid" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$app_pid" 2>/dev/null; then fail "deskenv still running 10 s after SIGTERM"; fi
rc=0; wait "$app_pid" || rc=$?
app_pid=""
[ $rc = 0 ] || [ $rc = 143 ] || fail "deskenv exited with status $rc after SIGTERM"
sleep 0.5
left="$(leftovers)"
[ -z "$left" ] || fail "processes left after shutdown: $left"
say "ok: stopped on SIGTERM (status $rc), no process left"
if grep -q '"level":"WARN".*no tokens' "$tmp/deskenv.log"; then fail "deskenv warned that it runs without tokens"; fi

# 8. Where it wrote. The Kubernetes manifests make the root filesystem
# read-only and mount volumes at the home, the state directory, /tmp and
# /dev/shm: anything this run wrote elsewhere would fail there.
if [ "$created_user" = 1 ]; then
  written="$(find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$home" -o -path "$workdir" -o -path /tmp \) -prune \
    -o -uid "$run_uid" -print 2>/dev/null | head -n 20)"
  [ -z "$written" ] || fail "wrote outside home, $workdir, /tmp and /dev/shm, which a read-only root filesystem refuses: $written"
  say "ok: wrote only to the home, $workdir, /tmp and /dev/shm (a read-only root filesystem holds)"
  left_tmp="$(find /tmp /dev/shm -xdev -uid "$run_uid" 2>/dev/null | grep -v "^$tmp" | head -n 20 || true)"
  if [ -n "$left_tmp" ]; then
    say "note: left behind in /tmp or /dev/shm after a clean stop (removed now):"; echo "$left_tmp" >&2
    echo "$left_tmp" | while read -r f; do rm -rf "$f"; done
  fi
else
  say "skipped the check of where it wrote: user '$user' existed before and may own files anywhere"
fi
say "PASS"
