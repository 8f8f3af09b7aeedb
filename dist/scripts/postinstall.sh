#!/bin/sh
# edgeplat package post-install (deb postinst / rpm %post). POSIX sh,
# idempotent: runs on every install, upgrade and reconfigure.
# deb: $1 = configure, $2 = previously configured version (empty on first install)
# rpm: $1 = 1 on install, 2 on upgrade
set -e

case "$1" in
    configure|1|2) ;;
    *) exit 0 ;;   # abort-upgrade, abort-remove, ...: nothing to do
esac

# The user's home and the parent of every state directory; root-owned, the
# per-role directories below it belong to edgeplat.
install -d -m 0755 -o root -g root /var/lib/edgeplat

# Dedicated system user and group, no login, home = state directory.
# Debian's adduser/addgroup where present (Debian policy), else shadow-utils
# useradd/groupadd (Fedora/RHEL, where `adduser` is merely useradd).
debian_adduser() {
    command -v adduser >/dev/null 2>&1 && command -v addgroup >/dev/null 2>&1 &&
        adduser --help 2>&1 | grep -q -- --ingroup
}
if ! getent group edgeplat >/dev/null 2>&1; then
    if debian_adduser; then
        addgroup --system edgeplat >/dev/null
    else
        groupadd --system edgeplat
    fi
fi
if ! getent passwd edgeplat >/dev/null 2>&1; then
    nologin=/usr/sbin/nologin
    [ -x "$nologin" ] || nologin=/sbin/nologin
    if debian_adduser; then
        # Debian adduser; --ingroup because the group already exists above.
        adduser --system --ingroup edgeplat --no-create-home \
            --home /var/lib/edgeplat --shell "$nologin" \
            --gecos "edgeplat service" edgeplat >/dev/null
    else
        useradd --system --gid edgeplat --no-create-home \
            --home-dir /var/lib/edgeplat --shell "$nologin" \
            --comment "edgeplat service" edgeplat
    fi
fi

# The agent's state directory (agent.data_dir), 0700. systemd's
# StateDirectory= creates it too; doing it here also covers hosts without
# systemd and manual runs as user edgeplat.
install -d -m 0700 -o edgeplat -g edgeplat /var/lib/edgeplat/agent

# Secrets files: 0640 root:edgeplat. On a first install the group did not
# exist yet when the package was unpacked, so set it now.
for f in /etc/edgeplat/agent.env /etc/edgeplat/api.env /etc/edgeplat/ingest.env; do
    if [ -f "$f" ]; then
        chgrp edgeplat "$f"
        chmod 0640 "$f"
    fi
done

if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    # Upgrade: restart only the roles that are running so they pick up the new
    # binary. Nothing is ever enabled or started here.
    if [ -n "$2" ] || [ "$1" = 2 ]; then
        systemctl try-restart edgeplat-agent.service edgeplat-api.service \
            edgeplat-ingest.service >/dev/null 2>&1 || true
    fi
fi

if [ -z "$2" ] && [ "$1" != 2 ]; then
    cat <<'MSG'
edgeplat installed. No service was enabled; pick the role(s) for this host:
  edge device:  edit /etc/edgeplat/agent.yaml (+ agent.env), then
                systemctl enable --now edgeplat-agent
  cloud:        edit /etc/edgeplat/api.yaml / ingest.yaml and set secrets in
                api.env / ingest.env, then
                systemctl enable --now edgeplat-api edgeplat-ingest
MSG
fi

exit 0
