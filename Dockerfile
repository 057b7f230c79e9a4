# deskenv appliance image. Both stages install their packages with the same
# scripts/install-deps.sh that `make run`, `make test` and CI use.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh build
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/deskenv ./cmd/deskenv

FROM debian:bookworm-slim
COPY scripts/install-deps.sh /usr/local/lib/deskenv/install-deps.sh
RUN /usr/local/lib/deskenv/install-deps.sh runtime \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 1000 --shell /bin/bash desk
COPY --from=build /out/deskenv /usr/local/bin/deskenv

USER desk
WORKDIR /home/desk
ENV DESKENV_ADDR=0.0.0.0:8080 \
    DESKENV_HOME=/home/desk
# 8080: HTTP (browser client, /mcp, control plane). 8443/udp: WebRTC media when
# started with --udp-port 8443 (one port is easier to publish than a range).
EXPOSE 8080 8443/udp
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["deskenv", "health", "--url", "http://127.0.0.1:8080/health"]
ENTRYPOINT ["deskenv"]
