#!/usr/bin/env bash
# Makes sure the tools the checks and the integration tests start are on PATH,
# installing a missing one from a registry the project's machines reach:
#
# - terraform: built with `go install` through the Go module proxy. v1.5.7 is
#   the newest release whose go.mod `go install` accepts (later ones carry
#   replace directives, which `go install pkg@version` refuses), and the last
#   one under the MPL. It is cached outside the repository, keyed by version.
# - java (the Firestore emulator runs on it): Debian's openjdk-17-jre-headless.
# - gcloud (the Firestore emulator itself): no reachable registry ships it, so
#   a machine without it fails here with that reason.
#
# Source this file (it exports PATH); it prints where each tool came from.
set -euo pipefail

TERRAFORM_FALLBACK_VERSION="v1.5.7"
tools_cache="${NODE_COMPACTOR_TOOLS_CACHE:-${HOME}/.cache/node-compactor-tools}"

if ! command -v terraform >/dev/null 2>&1; then
    terraform_bin="${tools_cache}/terraform-${TERRAFORM_FALLBACK_VERSION}"
    if [[ ! -x "${terraform_bin}/terraform" ]]; then
        if ! command -v go >/dev/null 2>&1; then
            echo "tools: terraform is missing and go is not installed to build it" >&2
            exit 1
        fi
        echo "tools: building terraform ${TERRAFORM_FALLBACK_VERSION} from the Go module proxy into ${terraform_bin}"
        started=$(date +%s)
        mkdir -p "${terraform_bin}"
        GOBIN="${terraform_bin}" CGO_ENABLED=0 go install -trimpath \
            "github.com/hashicorp/terraform@${TERRAFORM_FALLBACK_VERSION}"
        echo "tools: terraform built in $(( $(date +%s) - started ))s"
    fi
    export PATH="${terraform_bin}:${PATH}"
fi

if ! command -v java >/dev/null 2>&1; then
    echo "tools: installing Debian's openjdk-17-jre-headless for the Firestore emulator"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

if ! command -v gcloud >/dev/null 2>&1; then
    echo "tools: gcloud is missing; the Firestore emulator tests need it (google-cloud-cli with" \
        "google-cloud-cli-firestore-emulator), and no registry this machine reaches ships it" >&2
    exit 1
fi

echo "tools: terraform $(terraform version | head -n 1 | awk '{print $2}') ($(command -v terraform))"
echo "tools: java $(java -version 2>&1 | head -n 1)"
echo "tools: gcloud $(gcloud version 2>/dev/null | head -n 1)"
