#!/usr/bin/env bash
# Start a throwaway PostgreSQL for the tests and print how to reach it.
#
#   eval "$(.ci/postgres.sh)"            # cluster in /tmp/saihm-postgres-55432, port 55432
#   SAIHM_PG_PORT=55433 .ci/postgres.sh DIR
#   .ci/postgres.sh --stop [DIR]         # stop the cluster (its files stay for the next start)
#
# Installs Debian's `postgresql` package when no PostgreSQL is found (only as root), creates a
# cluster in DIR with initdb (as the `postgres` user when run as root), starts it with pg_ctl
# listening on 127.0.0.1:PORT only (its socket in DIR), creates the role `saihm` (password
# generated once, kept in DIR/password) and the database `saihm_test`, and prints one line:
#   export SAIHM_TEST_POSTGRES=postgresql://saihm:PASSWORD@127.0.0.1:PORT/saihm_test
# Everything else goes to stderr. Running it again reuses the cluster (starting it if stopped).
set -euo pipefail

stop=0
if [ "${1:-}" = "--stop" ]; then
  stop=1
  shift
fi
port="${SAIHM_PG_PORT:-55432}"
dir="${1:-${TMPDIR:-/tmp}/saihm-postgres-$port}"
role=saihm
database=saihm_test

say() { echo "postgres.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

find_bindir() {
  local candidate
  # Debian keeps each major version's server programs off PATH; take the newest.
  for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ]; then
      echo "$candidate"
      return 0
    fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}

bindir="$(find_bindir || true)"
if [ -z "$bindir" ]; then
  [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed (install Debian's postgresql package, or run as root)"
  say "installing Debian's postgresql package"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2
  apt-get install -y postgresql >&2
  bindir="$(find_bindir)" || die "PostgreSQL still not found after installing it"
fi

# initdb refuses to run as root: the cluster belongs to the postgres user then.
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
  owner=postgres
  as_owner() { runuser -u postgres -- "$@"; }
else
  owner="$(id -un)"
  as_owner() { "$@"; }
fi

data="$dir/data"
if [ "$stop" = 1 ]; then
  if [ -f "$data/PG_VERSION" ] && as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w stop >&2
  fi
  exit 0
fi

mkdir -p "$dir"
chown "$owner" "$dir"
chmod 700 "$dir"
as_owner test -w "$dir" || die "the $owner user cannot enter $dir (a parent directory is closed to it)"

if [ ! -f "$data/PG_VERSION" ]; then
  say "creating a cluster in $data"
  as_owner "$bindir/initdb" -D "$data" -U postgres -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 >"$dir/initdb.log" 2>&1 ||
    { tail -5 "$dir/initdb.log" >&2; die "initdb failed: see $dir/initdb.log"; }
fi
version="$(cat "$data/PG_VERSION")"
[ "$("$bindir/postgres" --version | grep -o '[0-9][0-9]*' | head -1)" = "$version" ] ||
  die "$data holds a PostgreSQL $version cluster but $bindir is another version: remove $dir"

if ! as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  say "starting PostgreSQL $version on 127.0.0.1:$port"
  as_owner "$bindir/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c max_connections=300" start >&2 ||
    { tail -5 "$dir/server.log" >&2; die "PostgreSQL did not start: see $dir/server.log"; }
fi

if [ ! -s "$dir/password" ]; then
  (umask 077 && head -c 18 /dev/urandom | base64 | tr '+/' 'ab' >"$dir/password")
fi
password="$(cat "$dir/password")"

psql_admin() { as_owner "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres -d postgres "$@"; }
psql_admin -v role="$role" -v password="$password" >&2 <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB', :'role')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I PASSWORD %L', :'role', :'password') \gexec
SQL
psql_admin -v role="$role" -v database="$database" >&2 <<'SQL'
SELECT format('CREATE DATABASE %I OWNER %I', :'database', :'role')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'database') \gexec
SQL

echo "export SAIHM_TEST_POSTGRES=postgresql://$role:$password@127.0.0.1:$port/$database"
