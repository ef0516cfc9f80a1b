# shellcheck shell=bash
# Shared setup for scripts/test and scripts/demo. Source it; do not execute it.
#
# After `reactor_setup_venv` returns, the virtualenv at $REPO_ROOT/.venv exists and holds the
# project installed in editable mode with the `all` and `dev` extras, and $PY is its python.
# Works on a fresh Debian machine that has only Python 3.11 (or newer) as `python3`.
#
# Knobs (environment):
#   PYTHON=/path/to/python3   interpreter used to create the venv (default: python3)
#   REACTOR_SKIP_INSTALL=1    do not (re)install the project into an existing venv

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO_ROOT/.venv"
PY="$VENV/bin/python"
export PIP_DISABLE_PIP_VERSION_CHECK=1 DEBIAN_FRONTEND=noninteractive

# Seconds since the calling script started (bash's SECONDS), for phase headers.
phase() { printf '\n=== [%3ss] %s\n' "$SECONDS" "$*"; }
die() { echo "error: $*" >&2; exit 1; }

# Runs apt-get as root (directly, or through sudo when available).
_apt() {
  if [ "$(id -u)" = 0 ]; then apt-get "$@";
  elif command -v sudo >/dev/null 2>&1; then sudo -n apt-get "$@";
  else die "need root (or sudo) to run: apt-get $*"; fi
}

# Installs Debian packages ($@) after a single `apt-get update` per process. Two setups at
# once (two suites started together) take turns on one machine-wide lock file instead of
# failing on dpkg's lock, and apt itself waits up to 10 minutes for a lock any other apt
# holds (DPkg::Lock::Timeout).
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* yourself"
  local lock="${TMPDIR:-/tmp}/reactor-apt.lock" wait=(-o DPkg::Lock::Timeout=600)
  (
    if command -v flock >/dev/null 2>&1; then
      exec 9>>"$lock" && flock -w 1800 9 || die "waited 30 min for $lock (another apt-get)"
    fi
    if [ -z "${_REACTOR_APT_UPDATED:-}" ]; then
      _apt "${wait[@]}" update -qq || die "apt-get update failed"
    fi
    _apt "${wait[@]}" install -y -qq --no-install-recommends "$@" >/dev/null \
      || die "apt-get install $* failed"
  ) || exit 1
  _REACTOR_APT_UPDATED=1
}

reactor_setup_venv() {
  local base="${PYTHON:-python3}"
  # A venv copied from elsewhere (or whose interpreter moved) is recreated.
  if [ -e "$VENV" ] && ! "$PY" -c 'import sys' >/dev/null 2>&1; then
    echo "setup: $VENV is broken; recreating it"
    rm -rf "$VENV"
  fi
  if [ ! -x "$PY" ]; then
    command -v "$base" >/dev/null 2>&1 || die "$base not found (Python 3.11+ is required)"
    "$base" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
      || die "$base is $("$base" -V 2>&1); Python 3.11+ is required"
    echo "setup: creating $VENV with $("$base" -V 2>&1)"
    if ! "$base" -m venv "$VENV"; then
      # Debian's own python3 ships venv/ensurepip in a separate package.
      rm -rf "$VENV"
      local ver
      ver="$("$base" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
      apt_install "python${ver}-venv"
      "$base" -m venv "$VENV" || die "python3 -m venv failed"
    fi
  fi
  if [ "${REACTOR_SKIP_INSTALL:-}" = 1 ]; then
    echo "setup: REACTOR_SKIP_INSTALL=1, not installing"
    return 0
  fi
  if [ ! -x "$VENV/bin/uv" ]; then
    "$PY" -m pip install -q uv || echo "setup: could not install uv; will use pip"
  fi
  if [ -x "$VENV/bin/uv" ] \
    && (cd "$REPO_ROOT" && "$VENV/bin/uv" pip install -q --python "$PY" -e '.[all,dev]'); then
    :
  else
    echo "setup: uv failed or is missing; falling back to pip (slower)"
    (cd "$REPO_ROOT" && "$PY" -m pip install -q -e '.[all,dev]') || die "pip install -e '.[all,dev]' failed"
  fi
}
