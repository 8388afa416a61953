#!/usr/bin/env bash
# Static checks of the Terraform module in terraform/: formatting, checkov,
# and `terraform validate` where the providers can be downloaded.
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
"${checkov_venv}/bin/checkov" --directory terraform --framework terraform \
    --skip-download --compact --quiet

echo "== terraform validate"
# validate needs the providers. A machine that cannot reach the Terraform
# registry cannot download them, which is no fault of the module; any other
# init failure (a configuration error) is.
init_log="$(mktemp)"
init_status=0
timeout "${init_timeout_seconds}" terraform -chdir=terraform init \
    -backend=false -input=false -no-color >"${init_log}" 2>&1 || init_status=$?
if [[ "${init_status}" -eq 0 ]]; then
    rm -f "${init_log}"
    terraform -chdir=terraform validate -no-color
elif [[ "${init_status}" -eq 124 ]] || grep -q -E \
        "Failed to query available provider packages|Failed to install provider|could not connect to registry" \
        "${init_log}"; then
    rm -f "${init_log}"
    echo "terraform validate: SKIPPED (providers cannot be downloaded on this machine)"
else
    cat "${init_log}" >&2
    rm -f "${init_log}"
    echo "terraform-checks: terraform init failed" >&2
    exit 1
fi
