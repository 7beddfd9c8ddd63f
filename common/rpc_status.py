"""How whole-request failures travel over gRPC (proto/replog/v1/replog.proto, convention 1):
a gRPC status code and message, plus Kafka's numeric error code in the trailing metadata key
``replog-error-code``. Servers call :func:`abort`; clients read it with :func:`error_code_of`.
"""

from __future__ import annotations

import grpc

ERROR_CODE_KEY = "replog-error-code"


async def abort(context, status: grpc.StatusCode, code: int, message: str):
    """Fail the current RPC with ``status`` and the Kafka ``code`` in the trailers."""
    context.set_trailing_metadata(((ERROR_CODE_KEY, str(int(code))),))
    await context.abort(status, message)


def error_code_of(err: grpc.RpcError) -> int | None:
    """The Kafka code a server put in the trailing metadata, if any."""
    try:
        trailers = err.trailing_metadata() or ()
    except Exception:  # noqa: BLE001 - a broken call may have no trailers at all
        return None
    for key, value in trailers:
        if key == ERROR_CODE_KEY:
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    return None
