#!/usr/bin/env bash
# Installs GPUPlane's dependencies: npm packages, the Temporal CLI (built once, cached outside
# the checkout), the web console's build and, with --with-postgres, what the tests need: Debian's
# PostgreSQL server, Chromium, promtool, the examples' venv (numpy, mlflow-skinny, psutil, scikit-learn, pandas, skops), the venv of
# the MLflow pytorch test (torch, lightning), the pinned uv, a real Temporal server and a real S3 server (versitygw).
set -euo pipefail
cd "$(dirname "$0")/.."
# A node_modules that is a link (a git worktree sharing another checkout's) is that checkout's to
# install: npm ci here would empty the folder it points to.
if [ ! -L node_modules ] && { [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; }; then
  echo "== npm ci"
  npm ci --no-audit --no-fund
fi
# gpuctl's processes, compiled into .dist (runtime/dist.mjs runs the sources through tsx wherever it is older than they are).
node scripts/build-dist.mjs
# The web console, built from web/ into web/dist (served by the API at /) when its sources changed.
if [ ! -f web/dist/index.html ] || [ -n "$(find web/src web/index.html web/vite.config.ts -newer web/dist/index.html -print -quit)" ]; then
  echo "== building the web console"
  npx vite build --config web/vite.config.ts --logLevel warn
fi
# As root, the local agent runs each project's jobs as a user of its own and keeps them off the
# control plane's ports with an nftables table (activities/gpu-host/port-guard.ts): it needs nft.
if [ "$(id -u)" = 0 ] && ! command -v nft >/dev/null 2>&1; then
  echo "== installing Debian package: nftables (jobs run as job users, kept off Temporal's ports)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null
fi
if [ "${1:-}" = "--with-postgres" ]; then
  # The tests need Debian's PostgreSQL server, and iproute2 for the network-partition test.
  missing=""
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
  command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
  # The console's browser tests drive Debian's Chromium (playwright-core, no browser download).
  command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
  # GET /metrics is checked with Debian's promtool (test/prometheus.test.ts), of the prometheus package.
  command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
  # Image jobs (test/container-image.e2e): podman runs them, runc where crun cannot (a cgroup v1/v2
  # hybrid host), and the test's image is a root filesystem of one static busybox.
  command -v podman >/dev/null 2>&1 || missing="$missing podman uidmap slirp4netns fuse-overlayfs"
  command -v runc >/dev/null 2>&1 || missing="$missing runc"
  dpkg -s busybox-static >/dev/null 2>&1 || missing="$missing busybox-static"
  if [ -n "$missing" ]; then
    echo "== installing Debian packages:$missing"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
  fi
  # The example scripts and the MLflow client tests need numpy, mlflow-skinny, psutil and, for mlflow.sklearn, scikit-learn, pandas and skops (examples/requirements.txt): a venv cached outside the checkout.
  echo "== examples venv: $(bash scripts/examples-venv.sh)"
  # test/mlflow-pytorch runs mlflow.pytorch.autolog with Lightning: torch from PyPI is the CUDA
  # build, about 5 GB, so the first setup spends minutes here, with pip's progress on stderr.
  echo "== MLflow + torch venv: $(bash scripts/mlflow-pytorch-venv.sh)"
  # test/mlflow-rest-tracking runs MLflow's own REST tests (vendored in test/fixtures/third_party/mlflow),
  # which import the full mlflow package and pytest (about 870 MB).
  echo "== MLflow tests venv: $(bash scripts/mlflow-tests-venv.sh)"
  # Agents build jobs' Python environments with uv (docs/environments.md): the pinned version, in a venv cached outside the checkout.
  echo "== uv venv: $(bash scripts/uv-venv.sh)"
  # The end-to-end test on a real Temporal cluster (temporal-server on PostgreSQL): built once, cached.
  echo "== Temporal server: $(bash temporal/ensure-temporal-server.sh)"
  # The object store's tests run a real S3 server, versitygw: built once (about a minute), cached beside the Temporal CLI.
  echo "== S3 server (versitygw): $(bash scripts/versitygw.sh)"
fi
echo "== Temporal CLI: $(bash temporal/ensure-temporal.sh)"
