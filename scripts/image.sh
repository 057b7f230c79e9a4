#!/usr/bin/env bash
# Builds deskenv's image with podman, both targets of the Dockerfile:
#   full -> $DESKENV_IMAGE:latest   the desktop with Chromium and Mousepad
#   slim -> $DESKENV_IMAGE:slim     the bare xterm desktop
# and prints their sizes. `make image` runs it; `make image-test` runs what it built.
#
#   scripts/image.sh [full] [slim]      (default: both)
#
# It runs podman as root with the runc runtime, which builds and runs OCI
# images on a plain Debian host without a Docker daemon (CI's machines). It
# installs podman, runc and debootstrap when missing (install-deps.sh image)
# and sets the two containers.conf settings this needs when they are unset.
#
# Base images: it tries to pull the real debian:bookworm-slim and
# golang:1.26-bookworm first, for a short while. Build machines without
# access to a registry cannot, so it then makes stand-ins and says so: a
# `debootstrap --variant=minbase` root with the slim image's settings for
# debian, and that root plus this machine's Go toolchain and CA bundle for
# golang. They are kept as tar files in $DESKENV_IMAGE_CACHE and in podman's
# storage, so they are made once.
#
# Environment:
#   DESKENV_IMAGE          image name (default localhost/deskenv)
#   DESKENV_IMAGE_CACHE    where stand-in roots are kept (default /var/cache/deskenv-image)
#   DESKENV_DEBIAN_MIRROR  debootstrap's mirror (default http://deb.debian.org/debian)
#   DESKENV_PULL_TIMEOUT   seconds to try each pull (default 30)
#   VERSION                stamped into the binary (default: git describe, or dev)
set -euo pipefail
cd "$(dirname "$0")/.."

name=${DESKENV_IMAGE:-localhost/deskenv}
cache=${DESKENV_IMAGE_CACHE:-/var/cache/deskenv-image}
mirror=${DESKENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}
pull_timeout=${DESKENV_PULL_TIMEOUT:-30}
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}

say() { echo "image: $*" >&2; }
die() { echo "image: $*" >&2; exit 1; }

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(full slim)
for t in "${targets[@]}"; do
  case "$t" in full|slim) ;; *) die "unknown target '$t' (use full or slim)" ;; esac
done

# Rootless podman needs subordinate ids, a user session and fuse-overlayfs,
# none of which CI's machines have; as root it needs nothing more.
[ "$(id -u)" -eq 0 ] || die "run as root (sudo make image): podman builds here as root with runc"

./scripts/install-deps.sh image

# containers.conf: no default ulimits (podman would raise the open-files
# limit to 1048576, above the hard limit root has on CI's machines, and runc
# fails: "error setting rlimit type 7: operation not permitted") and cgroupfs
# (no systemd to ask for cgroups). Only when the file does not say otherwise.
conf=/etc/containers/containers.conf
set_conf() { # section key value
  local section=$1 key=$2 value=$3
  mkdir -p "$(dirname "$conf")"
  touch "$conf"
  if grep -Eq "^[[:space:]]*${key}[[:space:]]*=" "$conf"; then
    return
  fi
  if grep -Eq "^[[:space:]]*\[${section}\][[:space:]]*$" "$conf"; then
    sed -i "/^[[:space:]]*\[${section}\][[:space:]]*$/a ${key} = ${value}" "$conf"
  else
    printf '\n[%s]\n%s = %s\n' "$section" "$key" "$value" >>"$conf"
  fi
  say "set ${key} = ${value} in [${section}] of $conf"
}
set_conf containers default_ulimits '[]'
set_conf engine cgroup_manager '"cgroupfs"'

# qualify names a short image name as a registry would: golang:1.26 is
# docker.io/library/golang:1.26.
qualify() {
  local first=${1%%/*}
  if [ "$first" = "$1" ]; then echo "docker.io/library/$1"
  elif [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then echo "$1"
  else echo "docker.io/$1"
  fi
}

standin_label=org.deskenv.stand-in
# standin_rev is part of the cached roots' names: a change to how they are
# made takes effect without anyone clearing the cache.
standin_rev=2

# debian_root makes (once) the stand-in root for debian:<suite>-slim: a
# minbase debootstrap with what Debian's slim images add (no package cache,
# no documentation, deb822 sources with updates and security).
debian_root() { # suite -> path of the tar
  local suite=$1 tar="$cache/debian-$1-slim-r$standin_rev.tar" dir
  if [ -s "$tar" ]; then echo "$tar"; return; fi
  mkdir -p "$cache"
  dir=$(mktemp -d "$cache/root.XXXXXX")
  say "debootstrap --variant=minbase $suite from $mirror (once; kept in $tar)"
  debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$dir.log" 2>&1 \
    || { tail -20 "$dir.log" >&2; rm -rf "$dir" "$dir.log"; die "debootstrap $suite failed"; }
  rm -f "$dir.log"
  cat >"$dir/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  cat >"$dir/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  rm -f "$dir/etc/apt/sources.list"
  cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # What the slim image leaves out, already installed by debootstrap.
  find "$dir/usr/share/doc" ! -type d ! -name copyright -delete
  find "$dir/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* \
         "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
  : >"$dir/etc/resolv.conf"
  tar -C "$dir" --numeric-owner --xattrs --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
  rm -rf "$dir"
  echo "$tar"
}

# golang_root makes (once) the stand-in root for golang:<go>-<suite>: the
# debian root, this machine's Go toolchain at /usr/local/go and its CA bundle
# (go mod download fetches over HTTPS), GOPATH /go as the real image has it.
golang_root() { # go-version suite -> path of the tar
  local want=$1 suite=$2 have tar dir debtar
  have=$(/usr/local/go/bin/go env GOVERSION 2>/dev/null) \
    || die "no Go toolchain at /usr/local/go to make a golang:$want-$suite stand-in from"
  case "$have" in
    "go$want"|"go$want".*) ;;
    *) die "the Dockerfile wants golang:$want-$suite; /usr/local/go is $have, not a stand-in for it" ;;
  esac
  tar="$cache/golang-$want-$suite-$have-r$standin_rev.tar"
  if [ -s "$tar" ]; then echo "$tar"; return; fi
  debtar=$(debian_root "$suite")
  dir=$(mktemp -d "$cache/root.XXXXXX")
  tar -C "$dir" --numeric-owner --xattrs -xf "$debtar"
  cp -a /usr/local/go "$dir/usr/local/go"
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
  install -d -m 1777 "$dir/go" "$dir/go/bin" "$dir/go/src"
  tar -C "$dir" --numeric-owner --xattrs -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
  rm -rf "$dir"
  echo "$tar"
}

# base_image makes sure one FROM image is in podman's storage: there
# already, pulled, or a stand-in.
base_image() {
  local img=$1 full tar repo tag made
  full=$(qualify "$img")
  if podman image exists "$full"; then
    made=$(podman image inspect --format "{{index .Labels \"$standin_label\"}}" "$full" 2>/dev/null || true)
    if [ -z "$made" ] || [ "$made" = "<no value>" ]; then
      return
    fi
    if [[ "$made" == *"-r$standin_rev" ]]; then
      say "$img: using the stand-in made earlier ($made), not the published image"
      return
    fi
    say "$img: the stand-in in podman's storage ($made) is from an older recipe; making it again"
    podman untag "$full"
  fi
  say "$img: pulling $full (up to ${pull_timeout}s)"
  if timeout "$pull_timeout" podman pull -q "$full" >/dev/null 2>"$cache/pull.log"; then
    rm -f "$cache/pull.log"
    return
  fi
  say "$img: cannot pull it ($(tail -1 "$cache/pull.log")); making a STAND-IN, not the published image"
  rm -f "$cache/pull.log"
  repo=${img%%:*} tag=${img#*:}
  local path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  case "$repo:$tag" in
    debian:*-slim)
      tar=$(debian_root "${tag%-slim}")
      podman import -q --change "ENV PATH=$path" --change 'CMD ["bash"]' \
        --change "LABEL $standin_label=debootstrap-minbase-${tag%-slim}-r$standin_rev" "$tar" "$full" >/dev/null ;;
    golang:*-*)
      tar=$(golang_root "${tag%%-*}" "${tag#*-}")
      local gov
      gov=$(/usr/local/go/bin/go env GOVERSION)
      podman import -q --change "ENV PATH=/go/bin:/usr/local/go/bin:$path" --change "ENV GOPATH=/go" \
        --change "ENV GOTOOLCHAIN=local" --change "ENV GOLANG_VERSION=${gov#go}" --change "WORKDIR /go" \
        --change 'CMD ["bash"]' --change "LABEL $standin_label=debootstrap-minbase-${tag#*-}+host-$gov-r$standin_rev" \
        "$tar" "$full" >/dev/null ;;
    *) die "$img: cannot pull it and have no stand-in for it (only debian:<suite>-slim and golang:<go>-<suite>)" ;;
  esac
  say "$img: stand-in ready as $full"
}

mkdir -p "$cache"
stages=" "
while read -r kw img as stage _; do
  [ "${kw^^}" = FROM ] || continue
  if [[ "$stages" != *" ${img,,} "* ]]; then base_image "$img"; fi
  if [ "${as^^}" = AS ]; then stages+="${stage,,} "; fi
done <Dockerfile

# Both targets build from one snapshot of the working tree (what git tracks or
# would track), so they hold the same binary even while files change under
# the build, and nothing git ignores (node_modules, bin) is sent.
context=$(mktemp -d /tmp/deskenv-image-context.XXXXXX)
trap 'rm -rf "$context"' EXIT
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$context" -xf -
else
  cp -a . "$context"
fi

# --network host: the build's RUN steps (apt, the Go module proxy) use the
# host's network and resolver as they are, with no bridge or NAT to set up.
# --layers keeps every step's layer, so a rebuild redoes only what changed.
# --format docker: the OCI format has no HEALTHCHECK, and podman would drop it.
for t in "${targets[@]}"; do
  tag=latest
  [ "$t" = slim ] && tag=slim
  say "building target $t as $name:$tag (VERSION=$version)"
  start=$SECONDS
  podman build --format docker --layers --network host --build-arg "VERSION=$version" --target "$t" -t "$name:$tag" \
    -f "$context/Dockerfile" "$context" >&2
  say "built $name:$tag in $((SECONDS - start)) s"
done
for t in "${targets[@]}"; do
  tag=latest
  [ "$t" = slim ] && tag=slim
  size=$(podman image inspect --format '{{.Size}}' "$name:$tag")
  echo "$name:$tag ($t): $((size / 1000000)) MB"
done
