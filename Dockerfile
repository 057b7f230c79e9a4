# deskenv appliance image: one desktop (Xvfb, openbox, xterm, Chromium, Mousepad)
# served to agents over MCP, to people over WebRTC and to trainers over the
# control plane, from one port.
#
# Two targets: the default, "full", is the desktop above; "slim" is the bare
# xterm desktop (no Chromium, no Mousepad), for agents that need a terminal
# and X only. full is slim plus those applications, so the two share every
# layer but the last (which a new binary rebuilds too: the price of keeping one
# copy of the layout). `make image` builds both with podman (scripts/image.sh).
#
# Every stage installs its Debian packages with scripts/install-deps.sh, the
# same script `make run`, `make test` and CI use, so the image and a developer's
# machine cannot drift apart. scripts/check-runtime.sh rebuilds this runtime
# layout (user, paths, environment, entrypoint) on a plain Debian host and
# drives it, and deploy/deploy_test.go lints this file: keep the three in step.
#
#   docker build -t deskenv .
#   docker build --target slim -t deskenv:slim .
#   docker run --rm -p 8080:8080 -p 8443:8443/udp --shm-size 1g \
#     -e DESKENV_OPERATOR_TOKEN=... -e DESKENV_AGENT_TOKEN=... deskenv
#
# Without any token the appliance listens on 127.0.0.1 only (anyone who reaches
# the port could drive the desktop), which inside a container means nobody
# outside it. Give it tokens (DESKENV_AGENT_TOKEN, DESKENV_OPERATOR_TOKEN,
# DESKENV_VIEWER_TOKEN or DESKENV_TOKENS_FILE) and it listens on :8080; or, on
# a network you trust, say so explicitly with -e DESKENV_ADDR=0.0.0.0:8080.
# docs/DEPLOY.md has the rest.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh build \
 && rm -rf /var/lib/apt/lists/*
# Modules first: this layer survives edits to the source.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/deskenv ./cmd/deskenv \
 && /out/deskenv version

# The bare xterm desktop (install-deps.sh's slim group: the runtime group
# without the applications, and without the X tools only hosts use), and
# everything deskenv's layout needs.
FROM debian:bookworm-slim AS slim
COPY scripts/install-deps.sh /usr/local/lib/deskenv/install-deps.sh
RUN /usr/local/lib/deskenv/install-deps.sh slim \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
# Two kinds of users (docs/DEPLOY.md, "Users and capabilities"). deskenv runs
# as deskenv and owns its state: the tasks (their evaluators and solutions),
# the episodes, /var/lib/deskenv (0711: its own files in it are 0700). The
# desktop session (window manager, apps, the bash trait, whatever the agent
# starts) runs as desk, whose home /home/desk is restored to what the image
# ships on every reset; pool mode runs desktop i as desk<i>, homes under
# /var/lib/deskenv/homes. No session user can read deskenv's files, signal it,
# or open another desktop's display. /tmp/.X11-unix is made here, sticky and
# root-owned as X expects, so Xvfb running as deskenv does not make its own.
RUN groupadd --gid 1000 deskenv \
 && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /var/lib/deskenv --shell /usr/sbin/nologin deskenv \
 && groupadd --gid 1001 desk \
 && useradd --uid 1001 --gid 1001 --create-home --home-dir /home/desk --shell /bin/bash desk \
 && chmod 0700 /home/desk \
 && for i in 0 1 2 3 4 5 6 7; do \
      useradd --uid "$((2000 + i))" --user-group --no-create-home --home-dir "/var/lib/deskenv/homes/d$i" --shell /bin/bash "desk$i"; \
    done \
 && install -d -o deskenv -g deskenv -m 0711 /var/lib/deskenv /var/lib/deskenv/homes \
 && install -d -o deskenv -g deskenv -m 0700 /var/lib/deskenv/episodes \
 && install -d -o root -g root -m 1777 /tmp/.X11-unix
COPY tasks /usr/share/deskenv/tasks
COPY --from=build /out/deskenv /usr/local/bin/deskenv
# The tasks are deskenv's alone. The binary gets the capabilities it needs and
# no more: setuid/setgid to start the session as desk, kill to stop desk's
# programs on a reset, chown/fowner/dac_override to restore desk's home (files
# of another user) to its baseline. They are file capabilities, so only this
# binary holds them, and the session's programs (exec'd as desk) hold none.
RUN chown -R deskenv:deskenv /usr/share/deskenv/tasks \
 && chmod -R go-rwx /usr/share/deskenv/tasks \
 && setcap cap_setuid,cap_setgid,cap_kill,cap_chown,cap_fowner,cap_dac_override+ep /usr/local/bin/deskenv

# VERSION comes this late so that a new version reuses every layer above.
ARG VERSION=dev
LABEL org.opencontainers.image.title="deskenv" \
      org.opencontainers.image.description="A Linux desktop for computer-use agents (MCP), people (WebRTC) and trainers (control plane)" \
      org.opencontainers.image.version="${VERSION}"

USER deskenv
WORKDIR /var/lib/deskenv
# DESKENV_ADDR is deliberately unset: see the top of this file.
# DESKENV_UDP_PORT puts all WebRTC media on the one published UDP port.
# DESKENV_TASKS loads the example tasks; mount your own directory over it.
ENV HOME=/var/lib/deskenv \
    LANG=C.UTF-8 \
    DESKENV_HOME=/home/desk \
    DESKENV_SESSION_USER=desk \
    DESKENV_SESSION=bare \
    DESKENV_TASKS=/usr/share/deskenv/tasks \
    DESKENV_EPISODES=/var/lib/deskenv/episodes \
    DESKENV_UDP_PORT=8443 \
    DESKENV_LOG_FORMAT=json
# 8080/tcp: everything HTTP (browser client, /mcp, control plane, /health).
# 8443/udp: WebRTC media for people watching; agents never need it.
EXPOSE 8080/tcp 8443/udp
HEALTHCHECK --interval=10s --timeout=4s --start-period=15s --retries=3 \
  CMD ["deskenv", "health", "--url", "http://127.0.0.1:8080/health"]
# tini is PID 1: it forwards SIGTERM to deskenv and reaps the orphans that
# desktop apps leave behind (a browser's helpers, a terminal's background jobs),
# which deskenv, waiting only for its own children, would leave as zombies.
# `deskenv init` runs first, as PID 1, and replaces itself with tini after
# moving the DESKENV_*_TOKEN variables onto a pipe deskenv reads once, so no
# process started later (the desktop's programs run as desk, but a mistake in
# that separation should not hand out tokens) finds them in /proc/1/environ.
ENTRYPOINT ["/usr/local/bin/deskenv", "init", "--", "/usr/bin/tini", "--", "/usr/local/bin/deskenv"]

# The full desktop: slim plus the desktop session's panel (tint2) and the
# applications its launchers start: Chromium, pcmanfm, Mousepad, galculator,
# MuPDF, LibreOffice Calc and Writer, and the fonts web pages ask for
# (install-deps.sh's apps group). It inherits slim's users, binary,
# environment, health check and entrypoint, and runs --session desktop (an
# error if a program of it is missing, rather than a quiet bare desktop).
# The last stage is what `docker build` makes without --target.
FROM slim AS full
USER root
RUN /usr/local/lib/deskenv/install-deps.sh apps \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
USER deskenv
ENV DESKENV_SESSION=desktop
