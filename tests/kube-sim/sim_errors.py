"""Kubernetes `Status` errors raised by the simulated API server's store and handlers."""

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An API error answered as a meta/v1 Status body with this code, reason and message."""

    def __init__(self, code, message, reason=None, details=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self):
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def not_found(res, name):
    return ApiError(404, '%s "%s" not found' % (res.qualified(), name),
                    details={"name": name, "group": res.group, "kind": res.plural})


def conflict(res, name, why):
    return ApiError(409, 'Operation cannot be fulfilled on %s "%s": %s' % (res.qualified(), name, why),
                    details={"name": name, "group": res.group, "kind": res.plural})


def already_exists(res, name):
    return ApiError(409, '%s "%s" already exists' % (res.qualified(), name), reason="AlreadyExists",
                    details={"name": name, "group": res.group, "kind": res.plural})


def invalid(res, name, errors):
    causes = []
    for e in errors:
        field, _, msg = e.partition(": ")
        if msg and " " not in field:
            causes.append({"reason": "FieldValueInvalid", "message": msg, "field": field})
        else:
            causes.append({"reason": "FieldValueInvalid", "message": e})
    return ApiError(422, '%s.%s "%s" is invalid: %s' % (res.kind, res.group, name, ", ".join(errors))
                    if res.group else '%s "%s" is invalid: %s' % (res.kind, name, ", ".join(errors)),
                    details={"name": name, "group": res.group, "kind": res.kind, "causes": causes})


def gone(message="too old resource version"):
    return ApiError(410, message, reason="Expired")
