#!/usr/bin/env bash
# A fresh clone, a fresh pnpm store and no variable set: the README's install must build every
# native module from source without downloading anything but registry packages (node-gyp
# must find Node's own headers by itself), and the built modules must load. The workspace's own
# install has usually been served from the store's cache of built packages, which hides a
# broken build; this one cannot be.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q . "$work/repo"
cd "$work/repo"
echo "fresh install: clone of $(git rev-parse --short HEAD), store $work/store, npm_config_nodedir unset"
start=$SECONDS
env -u npm_config_nodedir -u npm_config_node_gyp pnpm install --frozen-lockfile --store-dir "$work/store" \
  --reporter append-only >"$work/install.log" 2>&1 || {
  tail -n 40 "$work/install.log"
  echo "fresh install: pnpm install failed (log above)" >&2
  exit 1
}
sqlite=$(cd packages/finestore && node -e \
  "const D=require('better-sqlite3');console.log(new D(':memory:').prepare('select sqlite_version() v').get().v)")
gemm=$(grep -m1 -o 'levanter: native GEMM [^(]*' "$work/install.log" || echo 'levanter: no GEMM build line')
echo "fresh install: ok in $((SECONDS - start)) s (better-sqlite3 built and loaded, SQLite $sqlite; $gemm)"
