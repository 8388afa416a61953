#!/usr/bin/env bash
# Builds the control plane the e2e tests start (tests/e2e): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok, at the versions pinned in
# versions.env, from the Go module proxy (nothing comes from a release site).
#
# Binaries go to a cache outside the repository, one directory per component and
# version:
#   ${NODE_COMPACTOR_E2E_CACHE:-$HOME/.cache/node-compactor-e2e}/<component>-<version>/<component>
# A binary already there whose `--version` names the pinned version is reused;
# anything else is built again. Each binary is checked with `--version` after the
# build. The script prints what it built or reused and how long each step took.
#
# Recipes followed:
# - Kubernetes: k8s.io/kubernetes cannot be `go install`ed because it requires its
#   staging modules at v0.0.0; kubernetes/go.mod requires it and replaces
#   each staging module with its published v0.Y.Z twin (kubernetes/kubernetes#79384).
#   Version variables as hack/lib/version.sh sets them, so `--version` is honest.
# - etcd: go.etcd.io/etcd/server/v3's main package is the etcd binary
#   (server/main.go); its go.mod's replace lines point into etcd's own tree and
#   are ignored for a dependency, so the etcd wrapper requires the released modules.
# - kwok: `go install sigs.k8s.io/kwok/cmd/kwok@VERSION` (kwok's go.mod has no
#   replace lines), version variables as kwok's hack/releases.sh sets them.
#
# Every other file named build-*.sh in this directory is run afterwards (for
# components other tests add, such as the Cluster Autoscaler), with
# NODE_COMPACTOR_E2E_CACHE exported; each should follow the same layout and rules.
set -euo pipefail

toolchain="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${toolchain}/versions.env"
cache="${NODE_COMPACTOR_E2E_CACHE:-${HOME}/.cache/node-compactor-e2e}"
export NODE_COMPACTOR_E2E_CACHE="${cache}"

if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: go is not on PATH; the e2e control plane is built with Go 1.26 or later" >&2
    exit 1
fi
# Static binaries, as Kubernetes and etcd release them; no cgo toolchain needed.
export CGO_ENABLED=0
mkdir -p "${cache}"
work="$(mktemp -d "${cache}/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT

started=$(date +%s)
summary=()

# version_matches BINARY TEXT: the binary runs and its --version output contains TEXT.
version_matches() {
    [[ -x "$1" ]] && "$1" --version 2>&1 | grep -qF -- "$2"
}

# wrapper_pin DIR MODULE: the version of MODULE that the wrapper module in DIR builds.
wrapper_pin() {
    (cd "$1" && go list -mod=readonly -m -f '{{.Version}}' "$2")
}

# install_binary NAME VERSION BUILT EXPECTED: move BUILT into the cache and check its --version.
install_binary() {
    local name="$1" version="$2" built="$3" expected="$4"
    local dir="${cache}/${name}-${version}"
    mkdir -p "${dir}"
    mv -f "${built}" "${dir}/${name}"
    if ! version_matches "${dir}/${name}" "${expected}"; then
        echo "build.sh: ${dir}/${name} --version does not say ${expected}:" >&2
        "${dir}/${name}" --version >&2 || true
        exit 1
    fi
}

# report NAME VERSION HOW SECONDS
report() {
    local line
    line="$(printf '%-24s %-8s %-7s %5ss  %s' "$1" "$2" "$3" "$4" "${cache}/$1-$2/$1")"
    summary+=("${line}")
}

echo "== e2e control plane: cache ${cache}, $(go version)"

# -- Kubernetes ---------------------------------------------------------------------------
kube_components=(kube-apiserver kube-controller-manager kube-scheduler)
kube_missing=()
for name in "${kube_components[@]}"; do
    if ! version_matches "${cache}/${name}-${KUBERNETES_VERSION}/${name}" "Kubernetes ${KUBERNETES_VERSION}"; then
        kube_missing+=("${name}")
    fi
done
if [[ ${#kube_missing[@]} -eq 0 ]]; then
    for name in "${kube_components[@]}"; do report "${name}" "${KUBERNETES_VERSION}" reused 0; done
else
    pinned="$(wrapper_pin "${toolchain}/kubernetes" k8s.io/kubernetes)"
    if [[ "${pinned}" != "${KUBERNETES_VERSION}" ]]; then
        echo "build.sh: kubernetes/go.mod requires k8s.io/kubernetes ${pinned}, versions.env pins ${KUBERNETES_VERSION}" >&2
        exit 1
    fi
    major="${KUBERNETES_VERSION#v}"
    major="${major%%.*}"
    minor="${KUBERNETES_VERSION#v*.}"
    minor="${minor%%.*}"
    ldflags="-s -w"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X ${pkg}.gitVersion=${KUBERNETES_VERSION} -X ${pkg}.gitMajor=${major}"
        ldflags+=" -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
    done
    step=$(date +%s)
    packages=()
    for name in "${kube_missing[@]}"; do packages+=("k8s.io/kubernetes/cmd/${name}"); done
    echo "== building ${kube_missing[*]} ${KUBERNETES_VERSION} (the first build takes a while)"
    (cd "${toolchain}/kubernetes" && go build -mod=readonly -trimpath -ldflags "${ldflags}" -o "${work}/" "${packages[@]}")
    took=$(($(date +%s) - step))
    for name in "${kube_components[@]}"; do
        if [[ -e "${work}/${name}" ]]; then
            install_binary "${name}" "${KUBERNETES_VERSION}" "${work}/${name}" "Kubernetes ${KUBERNETES_VERSION}"
            report "${name}" "${KUBERNETES_VERSION}" built "${took}"
        else
            report "${name}" "${KUBERNETES_VERSION}" reused 0
        fi
    done
fi

# -- etcd ---------------------------------------------------------------------------------
if version_matches "${cache}/etcd-${ETCD_VERSION}/etcd" "etcd Version: ${ETCD_VERSION#v}"; then
    report etcd "${ETCD_VERSION}" reused 0
else
    pinned="$(wrapper_pin "${toolchain}/etcd" go.etcd.io/etcd/server/v3)"
    if [[ "${pinned}" != "${ETCD_VERSION}" ]]; then
        echo "build.sh: etcd/go.mod requires go.etcd.io/etcd/server/v3 ${pinned}, versions.env pins ${ETCD_VERSION}" >&2
        exit 1
    fi
    step=$(date +%s)
    echo "== building etcd ${ETCD_VERSION}"
    (cd "${toolchain}/etcd" && go build -mod=readonly -trimpath \
        -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}-module" \
        -o "${work}/etcd" go.etcd.io/etcd/server/v3)
    install_binary etcd "${ETCD_VERSION}" "${work}/etcd" "etcd Version: ${ETCD_VERSION#v}"
    report etcd "${ETCD_VERSION}" built $(($(date +%s) - step))
fi

# -- kwok ---------------------------------------------------------------------------------
if version_matches "${cache}/kwok-${KWOK_VERSION}/kwok" "kwok version ${KWOK_VERSION}"; then
    report kwok "${KWOK_VERSION}" reused 0
else
    step=$(date +%s)
    echo "== building kwok ${KWOK_VERSION}"
    GOBIN="${work}" go install -trimpath \
        -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" \
        "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
    install_binary kwok "${KWOK_VERSION}" "${work}/kwok" "kwok version ${KWOK_VERSION}"
    report kwok "${KWOK_VERSION}" built $(($(date +%s) - step))
fi

# -- components other tests add -----------------------------------------------------------
for extra in "${toolchain}"/build-*.sh; do
    [[ -e "${extra}" ]] || continue
    echo "== ${extra##*/}"
    bash "${extra}"
done

echo "== e2e control plane ready in $(($(date +%s) - started))s:"
printf '  %s\n' "${summary[@]}"
