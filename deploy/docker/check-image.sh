#!/usr/bin/env bash
# Builds the image (podman, or CONTAINER_ENGINE=docker) and checks what docs/DEPLOY.md promises:
# it runs as the non-root user, serves a chat completion from a mounted model folder, its
# HEALTHCHECK passes, and `stop` drains and exits 0. Usage: check-image.sh [MODEL.gguf]
set -euo pipefail
cd "$(dirname "$0")/../.."
engine=${CONTAINER_ENGINE:-podman}
model=$(realpath "${1:-../shared/models/stories260K.gguf}")
image=open-autoglm:check
name=open-autoglm-check
port=18080
format=()
[ "$engine" = podman ] && format=(--format docker)  # OCI images drop HEALTHCHECK
$engine build "${format[@]}" --network host -t "$image" .
$engine rm -f "$name" >/dev/null 2>&1 || true
$engine run -d --name "$name" --network host -e AUTOGLM_PORT="$port" -v "$(dirname "$model"):/models:ro" "$image" \
  -m "/models/$(basename "$model")" --port "$port"
trap '$engine rm -f "$name" >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 120); do
  curl -fs "http://127.0.0.1:$port/ready" >/dev/null && break
  sleep 1
done
curl -fs "http://127.0.0.1:$port/ready"; echo
echo "user in the container: $($engine exec "$name" id -u)"
[ "$($engine exec "$name" id -u)" = 10001 ]
curl -fs "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Once upon a time"}], "max_tokens": 16, "temperature": 0}'
echo
$engine exec "$name" python3 -c "import openautoglm; print('python package', openautoglm.__version__)"
if [ "$engine" = podman ]; then
  $engine healthcheck run "$name"
  echo "healthcheck: healthy"
fi
docker_health=$($engine inspect "$name" --format '{{json .Config.Healthcheck}}')
echo "healthcheck: $docker_health"
case "$docker_health" in *"/health"*) ;; *) echo "the image has no HEALTHCHECK on /health"; exit 1 ;; esac
$engine stop -t 35 "$name" >/dev/null
code=$($engine inspect "$name" --format '{{.State.ExitCode}}')
echo "exit code after stop: $code"
$engine logs "$name" 2>&1 | tail -3
[ "$code" = 0 ]
echo "image checked: $image"
