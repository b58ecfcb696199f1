#!/usr/bin/env bash
# Installs Debian packages for a set-up script: apt-install.sh WHO PACKAGE...
# (nothing to do without packages). WHO names the caller in the one log line.
set -euo pipefail
who=$1; shift
[ $# -gt 0 ] || exit 0
echo "$who: installing $* from Debian" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# RUNLEVEL=1: a package's own service (Debian's nginx on port 80) is not started.
RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
  --no-install-recommends "$@" >/dev/null
