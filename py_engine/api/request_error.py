"""RequestError: a bad OpenAI request body (request.py, memory.py), HTTP 400 with OpenAI's error object."""

from __future__ import annotations

from ..errors import WispError


class RequestError(WispError):
    """A request OpenAI's API would refuse, or one Wisp cannot serve: `param` names the field."""

    def __init__(self, message: str, param: str | None = None, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.param, self.status, self.code = param, status, code

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": str(self), "type": kind, "param": self.param, "code": self.code}}
