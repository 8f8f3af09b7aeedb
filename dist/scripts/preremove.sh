#!/bin/sh
# edgeplat package pre-remove (deb prerm / rpm %preun). POSIX sh, idempotent.
# deb: $1 = remove | upgrade | deconfigure | failed-upgrade
# rpm: $1 = 0 on erase, 1 on upgrade
# Only a real removal stops and disables the units; an upgrade leaves them
# running (postinstall try-restarts them with the new binary).
set -e

case "$1" in
    remove|deconfigure|0) ;;
    *) exit 0 ;;
esac

units="edgeplat-agent.service edgeplat-api.service edgeplat-ingest.service"

if [ -d /run/systemd/system ]; then
    # shellcheck disable=SC2086 # word splitting of $units is intended
    systemctl --no-reload disable --now $units >/dev/null 2>&1 || true
elif command -v systemctl >/dev/null 2>&1; then
    # No running systemd (container, chroot): still drop the enablement
    # symlinks so none dangle after removal.
    # shellcheck disable=SC2086
    systemctl --no-reload disable $units >/dev/null 2>&1 || true
fi

exit 0
