#!/usr/bin/env bash
# Rebuilds the image's runtime layout on this Debian host and drives it, since no
# container engine runs here: the same install script (runtime group), the same
# two users (deskenv's own, and the desktop session's), the same home and state
# directories and their modes, the same file capabilities on the binary, the
# same environment, the same entrypoint (deskenv init, tini, then deskenv) and
# the same health check command as the Dockerfile. Then it checks /health, that
# the session user can reach neither the tasks, the episodes, deskenv itself nor
# the display without its cookie, takes one MCP screenshot over plain HTTP (curl
# + JSON-RPC), stops the appliance with SIGTERM and checks that no process is
# left. It undoes everything it created on the way out: the users (only if it
# made them), directories, the binary.
#
#   sudo scripts/check-runtime.sh [options]
#
#   --user NAME        the image's user, deskenv's own (default deskenv)
#   --uid N            its uid when it has to be created, if free (default 1000)
#   --session-user NAME  the desktop session's user (default desk)
#   --session-uid N    its uid when it has to be created, if free (default 1001)
#   --home DIR         the session user's home, the desktop's (default /home/SESSION-USER)
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
# Needs root: it creates users and runs a process as one of them. Exits 0 when
# every check passed; otherwise prints what failed, and the appliance's log.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
user=deskenv uid=1000 suser=desk suid=1001 home="" workdir=/var/lib/deskenv addr=127.0.0.1:18080 udp_port=18443 bin="" keep=0
browser_task=browser-about own_user=0
envs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --user) user="$2"; shift 2 ;;
    --uid) uid="$2"; shift 2 ;;
    --session-user) suser="$2"; shift 2 ;;
    --session-uid) suid="$2"; shift 2 ;;
    --home) home="$2"; shift 2 ;;
    --workdir) workdir="$2"; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --addr) addr="$2"; shift 2 ;;
    --udp-port) udp_port="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --browser-task) browser_task="$2"; shift 2 ;;
    --own-user) own_user=1; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "check-runtime: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
home="${home:-/home/$suser}"
if [ ${#envs[@]} -eq 0 ]; then
  # The Dockerfile's ENV, for running this script by hand.
  envs=(HOME="$workdir" LANG=C.UTF-8 DESKENV_HOME="$home" DESKENV_SESSION_USER="$suser" DESKENV_TASKS=/usr/share/deskenv/tasks
        DESKENV_EPISODES="$workdir/episodes" DESKENV_UDP_PORT=8443 DESKENV_LOG_FORMAT=json)
fi

say() { echo "check-runtime: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
  say "FAIL: must run as root: it creates the users '$user' and '$suser' and runs deskenv as '$user', as the image does (try: sudo $0)"
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
    local owner; owner="$(stat -c %u "$p" 2>/dev/null)"
    [ "$owner" = "$run_uid" ] || [ "$owner" = "${session_uid:-none}" ] || continue
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
for cmd in Xvfb openbox xterm tini curl setpriv setcap xdpyinfo; do
  command -v "$cmd" >/dev/null || fail "$cmd is not installed (install-deps.sh runtime should have brought it, curl and setpriv come with Debian)"
done
command -v jq >/dev/null || fail "jq is needed to read JSON-RPC answers: apt-get install jq"

# 2. The users, as the Dockerfile makes them: deskenv's own (no home of its
# own: the state directory), and the session's, whose home is the desktop's.
created_user=0
# make_user NAME UID HOME SHELL CREATE_HOME: creates the user unless it exists;
# sets made=1 when it did.
make_user() {
  local name="$1" want_uid="$2" uhome="$3" shell="$4" create="$5" uid_opt=()
  made=0
  if id "$name" >/dev/null 2>&1; then return; fi
  if [ "$create" = 1 ] && [ -e "$uhome" ]; then fail "$uhome exists but user '$name' does not: remove it or pass --home"; fi
  if getent passwd "$want_uid" >/dev/null || getent group "$want_uid" >/dev/null; then
    say "uid/gid $want_uid is taken on this host ($(getent passwd "$want_uid" | cut -d: -f1)): letting useradd pick one (the image uses $want_uid)"
    uid_opt=(--user-group)
  else
    groupadd --gid "$want_uid" "$name"
    undo+=("groupdel '$name' 2>/dev/null || true")
    uid_opt=(--uid "$want_uid" --gid "$want_uid")
  fi
  local home_opt=(--no-create-home)
  [ "$create" = 1 ] && home_opt=(--create-home)
  useradd "${uid_opt[@]}" "${home_opt[@]}" --home-dir "$uhome" --shell "$shell" "$name"
  undo+=("userdel '$name' 2>/dev/null; true")
  [ "$create" = 1 ] && undo+=("rm -rf '$uhome'")
  made=1
  say "created user '$name' (uid $(id -u "$name"))"
}
if [ "$own_user" = 1 ]; then
  id "$user" >/dev/null 2>&1 || fail "--own-user: there is no user '$user'"
  id "$suser" >/dev/null 2>&1 || fail "--own-user: there is no user '$suser'"
  [ -d "$home" ] || fail "--own-user: $suser's home $home does not exist"
  created_user=1 # for the checks: every process and file of the users is this run's
  say "using the image's users '$user' (uid $(id -u "$user")) and '$suser' (uid $(id -u "$suser")), home $home"
else
  make_user "$user" "$uid" "$workdir" /usr/sbin/nologin 0; made_user=$made
  if id "$suser" >/dev/null 2>&1 && [ "$home" = "/home/$suser" ] && [ -d "$home" ]; then
    # Someone's real home: the desktop must not litter it.
    home="$tmp/home"
    install -d -o "$suser" -g "$(id -gn "$suser")" -m 0700 "$home"
    say "user '$suser' exists: using $home as the desktop's home, not $suser's own"
    envs=("${envs[@]/#DESKENV_HOME=*/DESKENV_HOME=$home}")
  fi
  make_user "$suser" "$suid" "$home" /bin/bash 1; made_suser=$made
  if [ "$made_user" = 1 ] && [ "$made_suser" = 1 ]; then created_user=1; fi
  [ "$created_user" = 1 ] || say "a user existed already: using it, and leaving it in place"
fi
run_uid="$(id -u "$user")"
run_gid="$(id -g "$user")"
session_uid="$(id -u "$suser")"
session_gid="$(id -g "$suser")"
[ "$run_uid" != "$session_uid" ] || fail "'$user' and '$suser' are the same user (uid $run_uid)"
# The home is the session's own: 0700, as the Dockerfile leaves it.
chown "$suser:$(id -gn "$suser")" "$home"
chmod 0700 "$home"

# 3. Directories, owned as in the image.
mkdir_owned() { # dir owner mode
  if [ -e "$1" ] && [ "$own_user" != 1 ]; then
    # Left by someone else (deskenv run as root makes /var/lib/deskenv/homes):
    # set aside for this run, put back after it.
    mv "$1" "$1.check-runtime-$$"
    undo+=("rm -rf '$1'; mv '$1.check-runtime-$$' '$1'")
  fi
  if [ ! -e "$1" ]; then
    install -d -o "$2" -g "$2" -m "$3" "$1"
    [ "$own_user" = 1 ] || undo+=("rm -rf '$1'")
  fi
}
mkdir_owned "$workdir" "$user" 0711
mkdir_owned "$workdir/homes" "$user" 0711
mkdir_owned "$workdir/episodes" "$user" 0700
tasks_dir=""
for kv in "${envs[@]}"; do
  if [ "${kv%%=*}" = DESKENV_TASKS ]; then
    tasks_dir="${kv#*=}"
    if [ ! -e "$tasks_dir" ]; then
      parent="$(dirname "$tasks_dir")"
      [ -e "$parent" ] || { mkdir -p "$parent"; undo+=("rm -rf '$parent'"); }
      cp -r "$repo/tasks" "$tasks_dir"
      undo+=("rm -rf '$tasks_dir'")
    fi
    # As the Dockerfile leaves them: deskenv's alone.
    chown -R "$user:$(id -gn "$user")" "$tasks_dir"
    chmod -R go-rwx "$tasks_dir"
  fi
done

# 4. The binary: built as the image's build stage builds it.
if [ -z "$bin" ]; then
  say "building deskenv"
  (cd "$repo" && CGO_ENABLED=1 go build -trimpath -o "$tmp/deskenv" ./cmd/deskenv)
elif [ "$own_user" != 1 ]; then
  cp "$bin" "$tmp/deskenv"
fi
[ "$own_user" = 1 ] && [ -n "$bin" ] || bin="$tmp/deskenv"
chmod 0755 "$bin"
# The file capabilities the Dockerfile gives the binary: deskenv switches to
# the session user with them, and needs nothing else.
caps=cap_setuid,cap_setgid,cap_kill,cap_chown,cap_fowner,cap_dac_override+ep
setcap "$caps" "$bin" || fail "setcap $caps $bin failed (the filesystem of $tmp may not keep extended attributes)"

# 5. Run it as the user, with only the image's environment, under tini.
as_user=(setpriv --reuid="$run_uid" --regid="$run_gid" --init-groups)
run_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${envs[@]}"
         DESKENV_ADDR="$addr" DESKENV_UDP_PORT="$udp_port" "$marker")
agent_token="agent-$RANDOM$RANDOM$RANDOM"
operator_token="operator-$RANDOM$RANDOM$RANDOM"
run_env+=(DESKENV_AGENT_TOKEN="$agent_token" DESKENV_OPERATOR_TOKEN="$operator_token")
say "starting deskenv as $user (uid $run_uid), the desktop as $suser (uid $session_uid), on $addr"
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
n=0
# shellcheck disable=SC2013 # words (PIDs), not lines
for c in $(cat /proc/"$deskenv_pid"/task/*/children 2>/dev/null); do
  case "$(cat "/proc/$c/comm" 2>/dev/null)" in
    Xvfb) ;;
    *) [ "$(stat -c %u "/proc/$c")" = "$session_uid" ] || fail "$(cat "/proc/$c/comm") (pid $c), a program of the desktop, does not run as $suser"
       n=$((n+1)) ;;
  esac
done
[ $n -gt 0 ] || fail "deskenv started no program of the desktop"
say "ok: the desktop's $n programs run as $suser"

# The session user against deskenv's state and deskenv itself: what the agent
# typing into the xterm could try.
as_session=(setpriv --reuid="$session_uid" --regid="$session_gid" --clear-groups)
episodes_dir="$(printf '%s\n' "${envs[@]}" | sed -n 's/^DESKENV_EPISODES=//p')"
denied() { # what command...: the session user must fail at it
  local what="$1"; shift
  if "${as_session[@]}" "$@" >/dev/null 2>&1; then fail "$suser can $what ($*)"; fi
}
if [ -n "$tasks_dir" ]; then
  denied "list the tasks" ls "$tasks_dir"
  denied "read a task file (evaluator, solution)" sh -c "cat '$tasks_dir'/*.json"
fi
if [ -n "$episodes_dir" ]; then
  denied "list the episodes" ls "$episodes_dir"
  denied "write an episode" touch "$episodes_dir/forged"
fi
denied "signal deskenv" kill -0 "$deskenv_pid"
# Even with a token it found, the port refuses the desktop's own programs.
code="$("${as_session[@]}" curl -s -o /dev/null -w '%{http_code}' -m 5 -H "Authorization: Bearer $operator_token" "$url/api/tasks" || true)"
[ "$code" = 403 ] || fail "$suser, with the operator token, reached the control plane: $code, want 403"
denied "read deskenv's environment" cat "/proc/$deskenv_pid/environ"
if "${as_session[@]}" cat "/proc/$deskenv_pid/cmdline" | tr '\0' '\n' | grep -q -- "-token\|$agent_token\|$operator_token"; then
  fail "deskenv's command line, readable by $suser, holds a token"
fi
# The display: refused without the cookie, open with the session's copy.
# shellcheck disable=SC2013 # words (PIDs), not lines
# (|| true: the loop's status is its last test's, which set -e and pipefail
# would take for a failure whenever xterm is not the last child.)
xterm_pid="$(for c in $(cat /proc/"$deskenv_pid"/task/*/children); do [ "$(cat "/proc/$c/comm")" = xterm ] && echo "$c"; done | head -n1 || true)"
if [ -n "$xterm_pid" ]; then
  dpy="$(tr '\0' '\n' < "/proc/$xterm_pid/environ" | sed -n 's/^DISPLAY=//p')"
  xauth_file="$(tr '\0' '\n' < "/proc/$xterm_pid/environ" | sed -n 's/^XAUTHORITY=//p')"
  [ -n "$xauth_file" ] || fail "the desktop's programs get no XAUTHORITY"
  denied "open the display without its cookie" env DISPLAY="$dpy" XAUTHORITY=/dev/null HOME=/nonexistent xdpyinfo
  "${as_session[@]}" env DISPLAY="$dpy" XAUTHORITY="$xauth_file" xdpyinfo >/dev/null 2>&1 ||
    fail "$suser cannot open the display $dpy with its own cookie ($xauth_file)"
  if env DISPLAY="$dpy" XAUTHORITY=/dev/null HOME=/nonexistent xdpyinfo >/dev/null 2>&1; then
    fail "root, without the cookie, can open the display $dpy: X access control is off"
  fi
fi
say "ok: $suser cannot read the tasks or the episodes, reach deskenv's port, signal deskenv, read its environment or a token in its command line, or open the display without its cookie"

# The tokens stay out of the agent's reach.
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
    [ "$(stat -c %u "$p")" = "$session_uid" ] || fail "chromium (pid ${p#/proc/}) does not run as $suser"
    n=$((n+1))
  done
  [ $n -gt 0 ] || fail "task $browser_task is set up but no chromium of this run is found"
  say "ok: task $browser_task opened its page in Chromium ($n processes, all $suser's)"
fi

# The desktop's files belong to the user.
if [ -n "$desktop_home" ] && [ -d "$desktop_home" ]; then
  bad="$(find "$desktop_home" ! -uid "$session_uid" -print -quit)"
  [ -z "$bad" ] || fail "$bad in the desktop's home is not owned by $suser"
  say "ok: everything under $desktop_home belongs to $suser"
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
# /dev/shm: anything this run wrote elsewhere would fail there. Container
# engines' storage is left out: the image's layers (`make image`) hold files
# of the image's uids, which on this host may be the ones this check made.
if [ "$created_user" = 1 ]; then
  written="$(find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$home" -o -path "$workdir" -o -path /tmp \
    -o -path /var/lib/containers -o -path /var/lib/docker \) -prune \
    -o \( -uid "$run_uid" -o -uid "$session_uid" \) -print 2>/dev/null | { grep -v "^${tasks_dir:-/nonexistent}" || true; } | head -n 20)"
  [ -z "$written" ] || fail "wrote outside home, $workdir, /tmp and /dev/shm, which a read-only root filesystem refuses: $written"
  say "ok: wrote only to the home, $workdir, /tmp and /dev/shm (a read-only root filesystem holds)"
  left_tmp="$(find /tmp /dev/shm -xdev \( -uid "$run_uid" -o -uid "$session_uid" \) 2>/dev/null | grep -v "^$tmp" | head -n 20 || true)"
  if [ -n "$left_tmp" ]; then
    say "note: left behind in /tmp or /dev/shm after a clean stop (removed now):"; echo "$left_tmp" >&2
    echo "$left_tmp" | while read -r f; do rm -rf "$f"; done
  fi
else
  say "skipped the check of where it wrote: user '$user' existed before and may own files anywhere"
fi
say "PASS"
