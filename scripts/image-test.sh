#!/usr/bin/env bash
# Runs the images `make image` built and checks each from outside, with
# e2e/image's TestImage: /health and the image's HEALTHCHECK, the front door's
# roles, MCP tools/list and a left_click the container's X server delivers,
# the page's video in headless Chromium, resets, the users docs/SECURITY.md
# promises, and that the session user finds no token.
#
#   scripts/image-test.sh [full] [slim]      (default: both)
#
# Each container runs with --network host on a free port, as root's podman
# (scripts/image.sh). The full image gets its tokens through the environment
# (which `deskenv init` moves onto a pipe), the slim one through a tokens file,
# so both ways are checked. Containers are removed however the script ends;
# a failure prints the container's last log lines first.
#
# Environment: DESKENV_IMAGE (default localhost/deskenv), as for image.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

name=${DESKENV_IMAGE:-localhost/deskenv}
say() { echo "image-test: $*" >&2; }
die() { echo "image-test: $*" >&2; exit 1; }

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(full slim)
for t in "${targets[@]}"; do
  case "$t" in full|slim) ;; *) die "unknown target '$t' (use full or slim)" ;; esac
done
[ "$(id -u)" -eq 0 ] || die "run as root (sudo make image-test): the images are root's podman's"
command -v podman >/dev/null || die "podman is not installed: run make image first"

containers=()
work=$(mktemp -d /tmp/deskenv-image-test.XXXXXX)
cleanup() {
  for c in "${containers[@]}"; do podman rm -f -t 5 "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port picks a port nothing listens on (tcp or udp).
free_port() {
  local proto=$1 p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 40000))
    if [ -z "$(ss -Hln"${proto:0:1}" "sport = :$p")" ]; then echo "$p"; return; fi
  done
  die "no free $proto port found"
}
token() { od -An -tx1 -N24 /dev/urandom | tr -d ' \n'; }

failed=()
for t in "${targets[@]}"; do
  tag=latest
  [ "$t" = slim ] && tag=slim
  image="$name:$tag"
  podman image exists "$image" || die "no image $image: run make image first"
  port=$(free_port tcp) udp=$(free_port udp)
  agent=$(token) operator=$(token) viewer=$(token)
  cname="deskenv-image-test-$t-$$"
  args=(run -d --name "$cname" --network host --shm-size 1g
        -e "DESKENV_ADDR=127.0.0.1:$port" -e "DESKENV_UDP_PORT=$udp")
  tokens_file=""
  if [ "$t" = slim ]; then
    # A tokens file readable by deskenv's user (uid 1000 in the image) only.
    printf 'agent=%s\noperator=%s\nviewer=%s\n' "$agent" "$operator" "$viewer" >"$work/tokens-$t"
    chown 1000:1000 "$work/tokens-$t"
    chmod 0400 "$work/tokens-$t"
    tokens_file=/etc/deskenv/tokens
    args+=(-v "$work/tokens-$t:$tokens_file:ro" -e "DESKENV_TOKENS_FILE=$tokens_file")
  else
    args+=(-e "DESKENV_AGENT_TOKEN=$agent" -e "DESKENV_OPERATOR_TOKEN=$operator" -e "DESKENV_VIEWER_TOKEN=$viewer")
  fi
  say "$image: running as $cname on 127.0.0.1:$port (udp $udp)"
  containers+=("$cname")
  podman "${args[@]}" "$image" >/dev/null
  start=$SECONDS
  if DESKENV_IMAGE_TEST_CONTAINER=$cname DESKENV_IMAGE_TEST_TARGET=$t \
     DESKENV_IMAGE_TEST_URL="http://127.0.0.1:$port" \
     DESKENV_IMAGE_TEST_AGENT_TOKEN=$agent DESKENV_IMAGE_TEST_OPERATOR_TOKEN=$operator \
     DESKENV_IMAGE_TEST_VIEWER_TOKEN=$viewer DESKENV_IMAGE_TEST_TOKENS_FILE=$tokens_file \
     go test -count=1 -v -timeout 10m -run '^TestImage$' ./e2e/image/; then
    say "$image: PASS in $((SECONDS - start)) s"
  else
    say "$image: FAIL; the container's last log lines:"
    podman logs --tail 60 "$cname" >&2 || true
    failed+=("$image")
  fi
  podman rm -f -t 5 "$cname" >/dev/null 2>&1 || true
done
[ ${#failed[@]} -eq 0 ] || die "failed: ${failed[*]}"
say "PASS: ${targets[*]}"
