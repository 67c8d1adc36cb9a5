#!/usr/bin/env bash
# Idempotent machine + venv set-up for Tributary: Java 17 (with javac) check, Debian packages, .venv, jars.
# `infra/setup.sh` sets up what `make demo` needs; `infra/setup.sh --full` (`make setup-full`, run by `make test`)
# also the Debian packages of the tests and of the serving and cluster profiles, and every pinned jar.
set -euo pipefail
cd "$(dirname "$0")/.."
FULL=""
[ "${1:-}" = "--full" ] && FULL=1

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3.11}
# Full set-up only: chromium (the UI smoke test takes a headless screenshot of the Dagster asset graph),
# postgresql (the cluster profile's catalog and Dagster instance, `tributary cluster up`, and the serving database,
# `tributary serve start`), iproute2's `ss` (the serving test checks what the server listens on). Maven (installed
# when `mvn` is missing, for every set-up) fetches the pinned jars (infra/jars.py) once into the jar cache.
APT_PACKAGES=""
[ -n "$FULL" ] && APT_PACKAGES="chromium postgresql iproute2"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else return 1; fi
}

apt_install() {
  # apt-get update once per set-up; lists may be stale or missing on a fresh machine.
  if [ -z "${APT_UPDATED:-}" ]; then as_root apt-get update -qq || return 1; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# 1. Java 17
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" != 17 ]; then
  say "Java 17 not found on PATH: installing openjdk-17-jre-headless"
  apt_install openjdk-17-jre-headless || die "Java 17 is required (Spark 4.1 + Iceberg). Install it: apt-get install openjdk-17-jre-headless"
  [ "$(java_major)" = 17 ] || die "Java 17 is required but 'java' on PATH is version '$(java_major)'; put Java 17 first on PATH"
fi

# 1b. javac from the same JDK 17: compiles the SQL guard jar (infra/jvm: read-only SQL policy, SQL server auth)
javac_17() {
  local javac
  javac="$(dirname "$(readlink -f "$(command -v java)")")/javac"
  [ -x "$javac" ] || javac=$(command -v javac || true)
  [ -n "$javac" ] && "$javac" -version 2>&1 | grep -q '^javac 17'
}
if ! javac_17; then
  say "javac (JDK 17) not found: installing openjdk-17-jdk-headless"
  apt_install openjdk-17-jdk-headless || die "javac 17 is required to build the SQL guard jar. Install it: apt-get install openjdk-17-jdk-headless"
  javac_17 || die "javac 17 is required but not found beside 'java' or on PATH; install openjdk-17-jdk-headless"
fi

# 2. Debian packages: Maven; for the full set-up Chromium, PostgreSQL and iproute2 too
missing=""
for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
if [ -n "$missing" ]; then
  say "installing Debian packages:$missing"
  # shellcheck disable=SC2086
  apt_install $missing || die "could not install$missing (run as root or with sudo: apt-get install$missing)"
fi

# 3. Python venv with the pinned dependencies (re-installed only when pyproject.toml changes)
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || die "Python 3.11 is required ($PYTHON is $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"
# The pinned jars are fetched by Maven while pip fills the venv: the downloads are independent, and
# `python -m infra.jars` needs the standard library only.
jar_log=$(mktemp)
"$PYTHON" -m infra.jars ${FULL:+--all} >"$jar_log" 2>&1 &
jar_fetch=$!
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
stamp="$VENV/.tributary-installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  say "installing Python dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
  echo "$want" > "$stamp"
fi

wait "$jar_fetch" || { cat "$jar_log" >&2; rm -f "$jar_log"; die "the pinned jars could not be fetched (above)"; }
rm -f "$jar_log"

# 4. Jars (the pinned Maven jars fetched and the SQL guard built once, cached in ~/.cache/tributary/jars), verified:
# those the embedded default's sessions use, or with --full every pinned jar and the S3 test server
"$VENV/bin/tributary" setup ${FULL:+--all} >/dev/null
say "ready"
