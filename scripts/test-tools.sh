#!/usr/bin/env bash
# The system tools the test suite runs, installed from Debian's packages where missing.
# `make test` runs this first and `.ci/run` runs `make test`: this table is the one list.
# A machine that has every tool gets no apt-get and no sudo; one that cannot install a missing
# tool stops here with one line naming it, not with failing tests ten minutes later.
set -euo pipefail

# tool on the PATH | Debian package | how to install (a test needs the binary, not its extras);
# `venv` is Python's venv module with ensurepip, which Debian ships apart and make needs for .venv
TOOLS="
redis-server  redis-server     recommends
chromium      chromium         recommends
chromedriver  chromium-driver  recommends
prometheus    prometheus       no-recommends
docker-compose docker-compose  no-recommends
git           git              no-recommends
node          nodejs           no-recommends
venv          python3-venv     no-recommends
"
APT_TIMEOUT=${TEST_TOOLS_APT_TIMEOUT:-600}
# An index refresh that cannot reach its mirror must fail within the minute the caller waits.
UPDATE_TIMEOUT=${TEST_TOOLS_UPDATE_TIMEOUT:-50}

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "make test: no Python interpreter '$PYTHON' (PYTHON names the Python 3.11+ to use)" >&2
  exit 1
fi
have() {
  if [ "$1" = venv ]; then
    # needed only to make .venv: one that exists (made by uv or virtualenv too) will do
    [ -x "$VENV/bin/python" ] || "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1
  else
    command -v "$1" >/dev/null 2>&1
  fi
}

missing=() with_recommends=() without_recommends=()
while read -r tool package how; do
  [ -n "$tool" ] || continue
  have "$tool" && continue
  missing+=("$tool")
  if [ "$how" = recommends ]; then with_recommends+=("$package"); else without_recommends+=("$package"); fi
done <<<"$TOOLS"
[ "${#missing[@]}" -eq 0 ] && exit 0

packages=("${with_recommends[@]}" "${without_recommends[@]}")
fail() {
  echo "make test: missing ${missing[*]}; install the Debian packages ${packages[*]} ($1)" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "no apt-get on this machine"
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  as_root=(sudo -n)
elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then
  echo "make test: installing ${packages[*]} needs root: sudo asks for your password" >&2
  # asked once here, in the foreground: under `timeout` a password prompt would be stopped
  sudo -v || fail "sudo refused"
  as_root=(sudo -n)
else
  fail "not root and no sudo to run apt-get"
fi

export DEBIAN_FRONTEND=noninteractive
apt_install() {  # its status is apt-get's, or timeout's 124
  if [ "${#with_recommends[@]}" -gt 0 ]; then
    timeout "$APT_TIMEOUT" "${as_root[@]}" apt-get install -y -qq "${with_recommends[@]}" || return
  fi
  if [ "${#without_recommends[@]}" -gt 0 ]; then
    timeout "$APT_TIMEOUT" "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
      "${without_recommends[@]}" || return
  fi
}

echo "make test: installing ${packages[*]} with apt-get (for ${missing[*]})" >&2
# apt-get's own output goes to a file the failure line names, so the failure stays one line
log=$(mktemp -t test-tools.XXXXXX)
status=0
apt_install >"$log" 2>&1 || status=$?
# timed out (124): a stalled download is not stale package lists, so no second wait
[ "$status" -ne 124 ] || fail "apt-get install timed out after ${APT_TIMEOUT}s; its output: $log"
# A fresh machine's package lists may be empty or stale: refresh them once, only if needed.
if [ "$status" -ne 0 ]; then
  timeout "$UPDATE_TIMEOUT" "${as_root[@]}" apt-get update -qq >>"$log" 2>&1 \
    || fail "apt-get update failed; its output: $log"
  apt_install >>"$log" 2>&1 || fail "apt-get install failed; its output: $log"
fi
rm -f "$log"

still=()
while read -r tool _; do
  [ -n "$tool" ] || continue
  have "$tool" || still+=("$tool")
done <<<"$TOOLS"
[ "${#still[@]}" -eq 0 ] || { missing=("${still[@]}"); fail "installed, yet not on the PATH"; }
