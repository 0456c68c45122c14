# The Open-AutoGLM server image. Build: `docker build -t open-autoglm .` (or `podman build`).
# Run with a model folder mounted read-only (docs/DEPLOY.md):
#   docker run --rm -p 8080:8080 -v "$PWD/models:/models:ro" open-autoglm -m /models/model.gguf

# Build stage: the same install script as a developer machine (its build-only part), then the
# server binary and the Python package, laid out under /stage.
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh --build-only && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAUTOGLM_TESTS=OFF -DAUTOGLM_SANITIZER_TESTS=OFF \
 && cmake --build build --target autoglm openautoglm_python \
 && DESTDIR=/stage cmake --install build --component python \
 && install -D -m 0755 build/src/cli/autoglm /stage/usr/local/bin/autoglm

# Run stage: the shared libraries the binary links, Python for the package, a non-root user.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libpcre2-8-0 libutf8proc2 libxxhash0 libsqlite3-0 libssl3 libyaml-cpp0.7 libspdlog1.10 libfmt9 \
      python3 python3-numpy \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/autoglm autoglm
COPY --from=build /stage/usr/local /usr/local
COPY deploy/docker/config.yaml /etc/autoglm/config.yaml
USER autoglm
WORKDIR /var/lib/autoglm
EXPOSE 8080
VOLUME ["/models"]
# Liveness (/health: the engine threads run). Orchestrators use /ready to route traffic. Serving
# on another port (--port): set AUTOGLM_PORT to it too.
ENV AUTOGLM_PORT=8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=300s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ['AUTOGLM_PORT'], timeout=2)"]
# SIGTERM drains: new requests get 503, those in flight finish within shutdown_grace_s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["autoglm", "serve", "--config", "/etc/autoglm/config.yaml"]
CMD ["-m", "/models/model.gguf"]
