#!/usr/bin/env bash
# A private PostgreSQL for `make dev`, so the postgres-writer example has a database:
#
#   scripts/dev-postgres.sh start <dir>   # create (once) and start it; prints the connection string
#   scripts/dev-postgres.sh stop <dir>
#
# The cluster lives in <dir> (kept between runs), listens on a free loopback port with trust
# authentication, and gets the example schema (examples/postgres-writer/schema.sql). PostgreSQL
# refuses to run as root, so as root it runs as the `postgres` user Debian's package creates.
set -euo pipefail

cmd=${1:?usage: dev-postgres.sh start|stop <dir>}
dir=$(realpath -m "${2:?usage: dev-postgres.sh start|stop <dir>}")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || { echo "dev-postgres: no PostgreSQL server; run make deps" >&2; exit 1; }

as_pg() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case $cmd in
start)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        mkdir -p "$dir"
        [ "$(id -u)" -ne 0 ] || chown postgres:postgres "$dir"
        as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync >"$dir/initdb.log"
    fi
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
    PGOPTIONS="-c client_min_messages=warning" "$bin/psql" -X -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -f "$root/examples/postgres-writer/schema.sql" >/dev/null
    echo "host=127.0.0.1 port=$port user=postgres dbname=postgres"
    ;;
stop)
    [ -f "$dir/data/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
*)
    echo "usage: dev-postgres.sh start|stop <dir>" >&2
    exit 2
    ;;
esac
