"""`kind: Status` error bodies worded as kube-apiserver words them.

Each constructor mirrors one of apimachinery's `k8s.io/apimachinery/pkg/api/errors`
helpers, so a client that inspects `reason`, `code` or `details` sees what a real
cluster would send. Never imports the rest of the fake.
"""

from __future__ import annotations

from tests.fakeapi.resources import JsonObject, Resource

CONFLICT_MESSAGE = "the object has been modified; please apply your changes to the latest version and try again"
EXPIRED_CONTINUE_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token "
    "in this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)


class ApiError(Exception):
    """A failed request: the HTTP status, its Status body and any extra response headers."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: JsonObject | None = None,
        list_meta: JsonObject | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.list_meta = list_meta or {}
        self.headers = headers or {}
        self.detail = ""  # what the fake knows and kube-apiserver does not say (see `unprocessable`)

    def body(self) -> JsonObject:
        return failure_body(self.code, self.reason, self.message, self.details, self.list_meta)


def failure_body(
    code: int,
    reason: str,
    message: str,
    details: JsonObject | None = None,
    list_meta: JsonObject | None = None,
) -> JsonObject:
    body: JsonObject = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": dict(list_meta or {}),
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def success_body(code: int, details: JsonObject | None = None) -> JsonObject:
    body: JsonObject = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def _object_details(resource: Resource, name: str) -> JsonObject:
    details: JsonObject = {"name": name}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural
    return details


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{resource.qualified} "{name}" not found',
        details=_object_details(resource, name),
    )


def already_exists(resource: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{resource.qualified} "{name}" already exists',
        details=_object_details(resource, name),
    )


def conflict(resource: Resource, name: str, why: str = CONFLICT_MESSAGE) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified} "{name}": {why}',
        details=_object_details(resource, name),
    )


def precondition_failed(resource: Resource, name: str, why: str) -> ApiError:
    """409 for a DELETE whose preconditions do not hold (k8s.io/apiserver's `rest.BeforeDelete`),
    which names the object by its kind, not its resource: `Lease.coordination.k8s.io "x"`."""
    details: JsonObject = {"name": name}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.kind
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified_kind} "{name}": {why}',
        details=details,
    )


def uid_mismatch_on_update(resource: Resource, namespace: str | None, name: str, given: str, stored: str) -> ApiError:
    """409 for a PUT whose body names another uid: etcd3's storage treats the uid as a precondition."""
    key = f"/registry/{REGISTRY_PREFIXES.get(resource.kind, resource.plural)}/"
    key += f"{namespace}/{name}" if namespace is not None else name
    return conflict(
        resource,
        name,
        f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: UID in precondition: {given}, UID in object meta: {stored}",
    )


# etcd keys whose prefix is not the resource's plural (pkg/kubeapiserver/default_storage_factory_builder.go).
REGISTRY_PREFIXES = {"Node": "minions"}


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: Resource, name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{resource.qualified} "{name}" is forbidden: {why}',
        details=_object_details(resource, name),
    )


def forbidden_cluster_wide(resource: Resource, user: str, verb: str) -> ApiError:
    """RBAC's refusal of a cluster-wide `verb` (list, watch) of a resource (k8s.io/apiserver's `forbiddenMessage`)."""
    details: JsonObject = {"kind": resource.plural}
    if resource.group:
        details["group"] = resource.group
    return ApiError(
        403,
        "Forbidden",
        f'{resource.qualified} is forbidden: User "{user}" cannot {verb} resource "{resource.plural}" in API group '
        f'"{resource.group}" at the cluster scope',
        details=details,
    )


def invalid(
    resource: Resource, name: str, field_errors: list[tuple[str, str, str]], *, by_resource: bool = False
) -> ApiError:
    """422 Invalid; each field error is (field path, cause reason, message) as `field.Error` prints.

    The object is named by its kind (`Lease.coordination.k8s.io "x"`), as validation names it, or
    `by_resource` (`leases.coordination.k8s.io "x"`), as the update handler's own checks do."""
    printed = [f"{path}: {message}" for path, _reason, message in field_errors]
    aggregate = printed[0] if len(printed) == 1 else "[" + ", ".join(printed) + "]"
    details: JsonObject = {"name": name} if name else {}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural if by_resource else resource.kind
    details["causes"] = [
        {"reason": reason, "message": message, "field": path} for path, reason, message in field_errors
    ]
    qualified = resource.qualified if by_resource else resource.qualified_kind
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {aggregate}', details=details)


def invalid_list_options(field_errors: list[tuple[str, str]]) -> ApiError:
    """422 for a list or watch whose options do not validate (`ValidateListOptions`); (field, Forbidden message)."""
    printed = [f"{path}: Forbidden: {message}" for path, message in field_errors]
    aggregate = printed[0] if len(printed) == 1 else "[" + ", ".join(printed) + "]"
    details: JsonObject = {
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [
            {"reason": "FieldValueForbidden", "message": f"Forbidden: {m}", "field": p} for p, m in field_errors
        ],
    }
    return ApiError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {aggregate}', details=details)


def unprocessable(detail: str) -> ApiError:
    """What kube-apiserver answers when a JSON patch cannot be applied (a failed `test`, a bad path).

    Its answer does not say why (`details` is empty, checked against 1.36 by tests/e2e); `detail`
    is kept on the error for a test that wants to know."""
    error = ApiError(422, "Invalid", "the server rejected our request due to an error in our request", details={})
    error.detail = detail
    return error


def unsupported_media_type() -> ApiError:
    """A PATCH whose Content-Type is none of the patch types (the patch handler's own check)."""
    return ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", details={})


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )


def path_not_found() -> ApiError:
    return ApiError(
        404,
        "NotFound",
        "the server could not find the requested resource",
        details={"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


ANONYMOUS = "system:anonymous"


def anonymous_forbidden_path(method: str, path: str) -> ApiError:
    """A request without credentials for a path that names no resource (`/api`, `/apis`, ...).

    kube-apiserver serves it as the `system:anonymous` user, whom RBAC lets read only
    `/version` and the health paths (system:public-info-viewer)."""
    verb = method.lower()  # RBAC names a non-resource verb by the HTTP method
    return ApiError(403, "Forbidden", f'forbidden: User "{ANONYMOUS}" cannot {verb} path "{path}"', details={})


def anonymous_forbidden(
    resource: Resource, verb: str, namespace: str | None, name: str | None, subresource: str | None
) -> ApiError:
    """What RBAC answers `system:anonymous` for a resource (k8s.io/apiserver's `forbiddenMessage`)."""
    what = resource.qualified if name is None else f'{resource.qualified} "{name}"'
    scope = f'in the namespace "{namespace}"' if namespace is not None else "at the cluster scope"
    resource_name = resource.plural if subresource is None else f"{resource.plural}/{subresource}"
    details: JsonObject = {}
    if name is not None:
        details["name"] = name
    if resource.group:
        details["group"] = resource.group
    details["kind"] = resource.plural
    return ApiError(
        403,
        "Forbidden",
        f'{what} is forbidden: User "{ANONYMOUS}" cannot {verb} resource "{resource_name}" '
        f'in API group "{resource.group}" {scope}',
        details=details,
    )


def expired_continue(inconsistent_continue: str) -> ApiError:
    return ApiError(
        410,
        "Expired",
        EXPIRED_CONTINUE_MESSAGE,
        list_meta={"continue": inconsistent_continue},
    )


def too_many_requests(message: str, causes: list[JsonObject], retry_after_seconds: int = 0) -> ApiError:
    details: JsonObject = {}
    if causes:
        details["causes"] = causes
    if retry_after_seconds:
        details["retryAfterSeconds"] = retry_after_seconds
    headers = {"Retry-After": str(retry_after_seconds)} if retry_after_seconds else {}
    return ApiError(429, "TooManyRequests", message, details=details or None, headers=headers)


def internal_error(detail: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {detail}",
        details={"causes": [{"message": detail}]},
    )


def generic(code: int, detail: str | None = None) -> ApiError:
    """A Status for a status code alone, phrased as `errors.NewGenericServerResponse` does."""
    fallback = (
        "InternalError" if code >= 500 else "",
        "an error on the server has prevented the request from succeeding",
    )
    reason, message = _GENERIC.get(code, fallback)
    if detail:
        message = f"{message} ({detail})"
    return ApiError(code, reason, message)


_GENERIC: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    403: ("Forbidden", "the server does not allow access to the requested resource"),
    404: ("NotFound", "the server could not find the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    410: ("Gone", "the requested resource is no longer available"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    500: ("InternalError", "an error on the server has prevented the request from succeeding"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: (
        "Timeout",
        "the server was unable to return a response in the time allotted, but may still be processing the request",
    ),
}
