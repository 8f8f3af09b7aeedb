#!/bin/sh
# edgeplat package post-remove (deb postrm / rpm %postun). POSIX sh, idempotent.
# deb: $1 = remove | purge | upgrade | failed-upgrade | abort-install | ...
# rpm: $1 = 0 on erase, 1 on upgrade (rpm has no purge: data and user stay,
#      as is usual for rpm packages)
set -e

if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
fi

if [ "$1" = purge ]; then
    # dpkg has already removed the conffiles under /etc/edgeplat.
    rm -rf /var/lib/edgeplat
    rmdir /etc/edgeplat 2>/dev/null || true
    if getent passwd edgeplat >/dev/null 2>&1; then
        if command -v deluser >/dev/null 2>&1; then
            deluser --system --quiet edgeplat >/dev/null 2>&1 || userdel edgeplat || true
        else
            userdel edgeplat || true
        fi
    fi
    if getent group edgeplat >/dev/null 2>&1; then
        if command -v delgroup >/dev/null 2>&1; then
            delgroup --system --quiet edgeplat >/dev/null 2>&1 || groupdel edgeplat || true
        else
            groupdel edgeplat || true
        fi
    fi
fi

exit 0
