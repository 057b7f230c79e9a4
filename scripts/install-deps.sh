#!/usr/bin/env bash
# Installs what deskenv needs from Debian's packages. One script for every place:
# the Dockerfile calls it with "build" and "runtime", `make run` with "build runtime",
# `make test` and CI with "all". It is quick when everything is already there.
#
#   scripts/install-deps.sh [build] [runtime] [slim] [apps] [test] [image] [all]
set -euo pipefail

build=(gcc libc6-dev pkg-config libx264-dev libvpx-dev libyuv-dev)
# runtime is also what the image ships: xfonts-base holds the X core fonts xterm
# draws with, fonts-liberation the metric-compatible Arial/Times/Courier web
# pages ask for, tini the PID 1 that reaps the desktop's orphans in a container.
# libcap2-bin's setcap gives the deskenv binary the capabilities it needs to
# run the desktop as a user of its own (docs/DEPLOY.md).
# runtime includes the full desktop's applications (the apps group), so that
# `make run` shows the same desktop as the image: deskenv's default session
# (--session auto) is the full desktop when they are installed.
runtime=(xvfb xauth xfonts-base openbox xterm x11-utils x11-xserver-utils xclip mousepad chromium
         tint2 pcmanfm galculator mupdf libreoffice-calc libreoffice-writer
         fonts-dejavu-core fonts-liberation ca-certificates procps tini libx264-164 libvpx7 libyuv0 libcap2-bin)
# libgtk-3-bin: gtk-query-settings, with which a test asks GTK whether the
# session tells it not to animate (display/toolkit_test.go).
test=(xdotool scrot imagemagick x11vnc nodejs npm ffmpeg shellcheck libgtk-3-bin)
# The image ships runtime in two parts: slim, the bare xterm desktop (its slim
# target), and apps, what the full desktop adds to it. Neither has hostonly:
# X tools in runtime for people and tests on a host, which deskenv never runs
# (x11-xserver-utils' xrdb pulls in the C preprocessor, 35 MB).
# apps: the tint2 panel and the programs its launchers start (the desktop
# session, display/session.go); no hsetroot: deskenv paints the wallpaper.
apps=(chromium mousepad tint2 pcmanfm galculator mupdf libreoffice-calc libreoffice-writer fonts-liberation)
hostonly=(x11-xserver-utils)
# image is what `make image` and `make image-test` need to build and run the
# image on a Debian host without Docker: podman with the runc runtime, and
# debootstrap for the stand-in base images when the real ones cannot be pulled.
image=(podman runc debootstrap)

want=()
[ $# -eq 0 ] && set -- all
for group in "$@"; do
  case "$group" in
    build) want+=("${build[@]}") ;;
    runtime) want+=("${runtime[@]}") ;;
    slim) for p in "${runtime[@]}"; do
            case " ${apps[*]} ${hostonly[*]} " in *" $p "*) ;; *) want+=("$p") ;; esac
          done ;;
    apps) want+=("${apps[@]}") ;;
    test) want+=("${test[@]}") ;;
    image) want+=("${image[@]}") ;;
    all) want+=("${build[@]}" "${runtime[@]}" "${test[@]}") ;;
    *) echo "install-deps: unknown group '$group' (use build, runtime, slim, apps, test, image or all)" >&2; exit 2 ;;
  esac
done

# Node.js may come from elsewhere than Debian (this project's machines ship
# Node 20 and npm 11 of their own, which Debian's npm package conflicts with):
# a working command is enough.
have_cmd() {
  case "$1" in
    nodejs) command -v node >/dev/null ;;
    npm) command -v npm >/dev/null ;;
    *) return 1 ;;
  esac
}

missing=()
for p in "${want[@]}"; do
  if have_cmd "$p"; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=sudo; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
