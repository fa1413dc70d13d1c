#!/usr/bin/env bash
# Builds the relay's static binary and its OCI image (relay/deploy/Containerfile).
#
#   bash relay/deploy/image.sh [--profile relay|<another cargo profile>]
#
# 1. callpost-relay for x86_64-unknown-linux-musl: a static-pie executable
#    with no dynamic dependencies (checked), in
#    $CARGO_TARGET_DIR (default target)/x86_64-unknown-linux-musl/<profile
#    dir>/callpost-relay. The "relay" profile is what ships; scripts/test.sh
#    builds "static-dev" (Cargo.toml: two minutes less on 2 cores).
# 2. The image, with buildah (Debian's; no daemon, no root daemon socket),
#    in a storage directory of its own under target/image (vfs: no overlay
#    mount needed), written as a docker-archive, which `docker load` and
#    `podman load` read and `skopeo copy` sends to any registry:
#    target/image/callpost-relay-<version>.tar. The docker format keeps the
#    HEALTHCHECK (the OCI image format has no field for it). Every file's
#    time is 0 (--timestamp 0): the same binary gives the same image digest.
#
# Installs what is missing: the musl target (rustup), musl-tools (the C
# compiler for SQLite and ring), buildah, ca-certificates. Prints the
# archive's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=relay
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    *) echo "usage: bash relay/deploy/image.sh [--profile relay|<another cargo profile>]" >&2; exit 2 ;;
  esac
done
target=x86_64-unknown-linux-musl
dir=$profile
[ "$profile" = dev ] && dir=debug

missing=()
command -v musl-gcc >/dev/null || missing+=(musl-tools)
command -v buildah >/dev/null || missing+=(buildah)
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target" >&2

cargo build --locked --profile "$profile" -p callpost-relay --bin callpost-relay --target "$target" >&2
bin=${CARGO_TARGET_DIR:-target}/$target/$dir/callpost-relay
# Static: no interpreter and no shared library to find in an empty root.
if readelf -lW "$bin" | grep -q 'INTERP' || readelf -dW "$bin" | grep -q '(NEEDED)'; then
  echo "image.sh: $bin is not static" >&2
  exit 1
fi

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
out=target/image
ctx=$out/context
rm -rf "$ctx"
# var/lib here, root's: the state directory alone is the user's.
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/rootfs/var/lib" "$ctx/state"
chmod 1777 "$ctx/rootfs/tmp"
# Without debug info (the dev profile's line tables; the relay profile has
# none), with the symbols (2.5 MB), so a backtrace names its functions.
strip --strip-debug -o "$ctx/rootfs/usr/bin/callpost-relay" "$bin"
chmod 0755 "$ctx/rootfs/usr/bin/callpost-relay"
cp /etc/ssl/certs/ca-certificates.crt "$ctx/rootfs/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\ncallpost:x:65532:65532:callpost relay:/var/lib/callpost-relay:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\ncallpost:x:65532:\n' >"$ctx/rootfs/etc/group"

# A storage of its own, removed afterwards: the archive is the product.
storage=$out/storage
rm -rf "$storage"
b=(buildah --root "$PWD/$storage/root" --runroot "$PWD/$storage/run" --storage-driver vfs)
tag=localhost/callpost-relay:$version
"${b[@]}" bud --quiet --format docker --timestamp 0 --layers=false \
  --label org.opencontainers.image.title=callpost-relay \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.licenses="MIT OR Apache-2.0" \
  -f relay/deploy/Containerfile -t "$tag" "$ctx" >&2
archive=$out/callpost-relay-$version.tar
rm -f "$archive"
# v2s2: the docker manifest and config, which keep the HEALTHCHECK
# (without it, buildah writes the OCI config into the archive, and drops it).
"${b[@]}" push --quiet --format v2s2 "$tag" "docker-archive:$PWD/$archive:$tag" >&2
"${b[@]}" rmi --all >/dev/null 2>&1 || true
rm -rf "$storage"
echo "$PWD/$archive"
