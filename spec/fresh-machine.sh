#!/bin/sh
# spec/fresh-machine.sh — the README's first block on a machine that has
# never seen the project.
#
# Builds a minimal Debian root (mmdebstrap --variant=minbase, with
# ca-certificates) from the host's configured apt sources (and the host's
# Acquire:: settings, such as a proxy), clones this checkout's HEAD into it,
# enters it with unshare --mount --pid --fork and pivot_root (not chroot: a
# chroot changes what namespaces allow), and runs the first fenced block of
# README.md, extracted from the file, never copied:
#
#   root   a fresh root; the block verbatim, as root, in /root/hcp-lua.
#   user   another fresh root with a new user `fresh`: root runs the
#          block's first line (it says "as root"); the user runs the rest;
#          make deps stops and prints the command to run; root runs that
#          printed command; the user runs the rest of the block again.
#
# Needs root, mmdebstrap, git and the package archive; takes minutes. It is
# not part of make test. Usage: spec/fresh-machine.sh [root|user]...
# (default: both). FRESH_DIR=dir keeps the roots and logs there.
# Prints one summary line per run ("fresh-machine: <run>: ...") and exits
# non-zero when a run fails.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
runs=${*:-root user}
[ "$(id -u)" = 0 ] || { echo "fresh-machine: needs root" >&2; exit 2; }
command -v mmdebstrap >/dev/null 2>&1 || { echo "fresh-machine: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }

work=${FRESH_DIR:-$(mktemp -d /var/tmp/hcp-fresh.XXXXXX)}
mkdir -p "$work"
echo "fresh-machine: working in $work"

# The first fenced block of README.md, as the shell will run it.
awk '/^```/ { if (inside) exit; inside = 1; next } inside { print }' "$repo/README.md" > "$work/block.sh"
[ -s "$work/block.sh" ] || { echo "fresh-machine: README.md has no fenced block" >&2; exit 1; }
sed -n 1p "$work/block.sh" > "$work/first-line.sh"
sed 1d "$work/block.sh" > "$work/rest.sh"

# The host's apt sources (deb822 or one-line) and its Acquire:: settings.
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
set --
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -s "$f" ] && set -- "$@" "$f"
done
[ $# -gt 0 ] || { echo "fresh-machine: no apt sources on this host" >&2; exit 1; }
aptopts=""
for f in /etc/apt/apt.conf.d/*; do
  if [ -f "$f" ] && grep -q '^[[:space:]]*Acquire::' "$f"; then aptopts="$aptopts --aptopt=$f"; fi
done
if [ ! -s "$work/base.tar" ]; then
  # shellcheck disable=SC2086 # one word per option
  mmdebstrap --quiet --variant=minbase --include=ca-certificates $aptopts "$suite" "$work/base.tar" "$@" \
    > "$work/mmdebstrap.log" 2>&1 || { tail -n 20 "$work/mmdebstrap.log"; echo "fresh-machine: mmdebstrap failed"; exit 1; }
fi

# A fresh root from the base image.
new_root() {
  rm -rf "$1"
  mkdir -p "$1"
  tar -C "$1" -xf "$work/base.tar"
  cp /etc/resolv.conf "$1/etc/resolv.conf"
  # a Debian machine has its localhost lines (the installer writes them); a
  # minbase root has no /etc/hosts at all
  [ -e "$1/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$1/etc/hosts"
  # the host's own CAs (a TLS proxy's, say), as its apt settings are: without
  # them npm cannot reach its registry from behind such a proxy. Kept where
  # update-ca-certificates finds them again when a package triggers it.
  for ca in /usr/local/share/ca-certificates/*.crt; do
    [ -f "$ca" ] || continue
    mkdir -p "$1/usr/local/share/ca-certificates"
    cp "$ca" "$1/usr/local/share/ca-certificates/"
    cat "$ca" >> "$1/etc/ssl/certs/ca-certificates.crt"
  done
  cp "$work/block.sh" "$work/first-line.sh" "$work/rest.sh" "$1/"
}

# enter ROOT SCRIPT: run the file SCRIPT (a path inside ROOT) as root of a
# new mount and pid namespace whose / is ROOT (pivot_root), with a fresh
# /proc, the host's /dev and /sys, a private /tmp, and an empty environment.
enter() {
  unshare --mount --pid --fork /bin/sh -euc '
    root=$1 script=$2
    mount --make-rprivate /
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
    mkdir -p "$root/.old-root"
    cd "$root"
    pivot_root . .old-root
    cd /
    umount -l /.old-root
    rmdir /.old-root
    exec /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh "$script"
  ' enter "$1" "$2"
}

# summary RUN LOG STATUS: one line — the status, and busted's summary.
summary() {
  tests=$(sed 's/\x1b\[[0-9;]*m//g' "$2" | grep -E '^[0-9]+ successes? / ' | tail -n 1 || true)
  demo=$(grep -c '"ok":true' "$2" || true)
  if [ "$3" = 0 ]; then verdict=passed; else verdict="FAILED (exit $3)"; fi
  echo "fresh-machine: $1: $verdict; make demo ok lines: $demo; make test: ${tests:-no busted summary} (log: $2)"
}

failed=0
for run in $runs; do
  root="$work/root-$run"
  log="$work/$run.log"
  new_root "$root"
  case $run in
    root)
      git clone -q "$repo" "$root/root/hcp-lua"
      cat > "$root/run.sh" <<'EOF'
set -e
cd /root/hcp-lua
echo "== the README block, verbatim, as root"
sh -ex /block.sh
EOF
      ;;
    user)
      mkdir -p "$root/home/fresh"
      git clone -q "$repo" "$root/home/fresh/hcp-lua"
      cat > "$root/run.sh" <<'EOF'
set -e
useradd -M -d /home/fresh -s /bin/sh fresh
chown -R fresh:fresh /home/fresh
cd /home/fresh/hcp-lua
as_user() { runuser -u fresh -- env HOME=/home/fresh sh -c "cd /home/fresh/hcp-lua && $1"; }
echo "== the README's first line, as root (it says so)"
sh -ex /first-line.sh
echo "== the rest of the block as the user: make deps stops and says what to run"
if as_user 'sh -ex /rest.sh' > /tmp/user-first.log 2>&1; then
  cat /tmp/user-first.log
  echo "fresh-machine: the user's first run did not stop for missing packages"; exit 1
fi
cat /tmp/user-first.log
cmd=$(sed -n 's/^deps: run: //p' /tmp/user-first.log | head -n 1)
[ -n "$cmd" ] || { echo "fresh-machine: make deps printed no command"; exit 1; }
echo "== the printed command, run by root: $cmd"
sh -exc "$cmd"
echo "== the rest of the block again, as the user"
as_user 'sh -ex /rest.sh'
EOF
      ;;
    *) echo "fresh-machine: unknown run $run (root or user)" >&2; exit 2 ;;
  esac
  status=0
  enter "$root" /run.sh > "$log" 2>&1 || status=$?
  summary "$run" "$log" "$status"
  [ "$status" = 0 ] || failed=1
done
exit $failed
