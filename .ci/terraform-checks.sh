#!/usr/bin/env bash
# Static checks of the Terraform in terraform/ (the root module) and
# terraform/modules/node-compactor (the per-cluster module it calls):
# formatting, checkov, and `terraform validate` of each where the providers
# can be downloaded.
#
# Checkov lives in its own virtualenv (${CHECKOV_VENV:-.venv-checkov}) because
# it pins many packages that clash with the function's dependencies.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

checkov_venv="${CHECKOV_VENV:-.venv-checkov}"
init_timeout_seconds="${TERRAFORM_INIT_TIMEOUT:-60}"

if ! command -v terraform >/dev/null 2>&1; then
    echo "terraform-checks: terraform is not installed" >&2
    exit 1
fi

echo "== terraform fmt -check -recursive terraform/"
terraform fmt -check -recursive -diff terraform/
echo "terraform fmt: OK"

echo "== checkov (${checkov_venv})"
if [[ ! -x "${checkov_venv}/bin/checkov" ]]; then
    python3 -m venv "${checkov_venv}"
fi
# pip's chatter goes to a log that is shown only when the install fails.
pip_log="$(mktemp)"
if ! "${checkov_venv}/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r requirements-checkov.txt >"${pip_log}" 2>&1; then
    cat "${pip_log}" >&2
    rm -f "${pip_log}"
    echo "terraform-checks: could not install checkov into ${checkov_venv}" >&2
    exit 1
fi
rm -f "${pip_log}"

# --skip-download: use the checks shipped in the package, fetch nothing.
# Skips are written inline in the HCL (#checkov:skip=ID:reason), never here.
# A file checkov cannot parse is left out of the scan, and checkov still exits
# 0 ("Parsing errors: 1" in its summary): that fails the check here.
for directory in terraform terraform/modules/node-compactor; do
    echo "-- checkov ${directory}"
    checkov_log="$(mktemp)"
    checkov_status=0
    "${checkov_venv}/bin/checkov" --directory "${directory}" --framework terraform \
        --skip-download --compact --quiet >"${checkov_log}" 2>&1 || checkov_status=$?
    cat "${checkov_log}"
    if grep -q "Parsing errors" "${checkov_log}"; then
        rm -f "${checkov_log}"
        echo "terraform-checks: checkov could not parse a file of ${directory}, so it was not scanned" \
            "(checkov --directory ${directory} --framework terraform without --quiet names it)" >&2
        exit 1
    fi
    rm -f "${checkov_log}"
    if [[ "${checkov_status}" -ne 0 ]]; then
        exit "${checkov_status}"
    fi
done

# validate needs the providers. A machine that cannot reach the Terraform
# registry cannot download them, which is no fault of the module; any other
# init failure (a configuration error) is.
validate() {
    local directory="$1"
    echo "== terraform validate ${directory}"
    local init_log
    init_log="$(mktemp)"
    local init_status=0
    timeout "${init_timeout_seconds}" terraform -chdir="${directory}" init \
        -backend=false -input=false -no-color >"${init_log}" 2>&1 || init_status=$?
    if [[ "${init_status}" -eq 0 ]]; then
        rm -f "${init_log}"
        terraform -chdir="${directory}" validate -no-color
    elif [[ "${init_status}" -eq 124 ]] || grep -q -E \
            "Failed to query available provider packages|Failed to install provider|could not connect to registry" \
            "${init_log}"; then
        rm -f "${init_log}"
        echo "terraform validate ${directory}: SKIPPED (providers cannot be downloaded on this machine)"
    else
        cat "${init_log}" >&2
        rm -f "${init_log}"
        echo "terraform-checks: terraform init failed in ${directory}" >&2
        exit 1
    fi
}

validate terraform
validate terraform/modules/node-compactor
