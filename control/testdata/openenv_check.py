"""Validate deskenv's OpenEnv answers with pydantic, as OpenEnv's Python side parses them.

The models below are written after the field definitions in meta-pytorch/OpenEnv
(commit 685de411e5f77286b0fd94798d42c4467cf8a1bc):
src/openenv/core/env_server/types.py and mcp_types.py. Like those, response
models forbid extra fields, State allows them. Reads a JSON list of
{"kind": ..., "body": ...} on stdin and prints "<n> ok" when all validate.
"""

import json
import sys
from enum import Enum
from typing import Any, Dict, List, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Health(str, Enum):
    healthy = "healthy"
    unhealthy = "unhealthy"
    degraded = "degraded"


class HealthResponse(Strict):
    status: Health


class EnvironmentMetadata(Strict):
    name: str
    description: str
    readme_content: Optional[str] = None
    version: Optional[str] = None
    author: Optional[str] = None
    documentation_url: Optional[str] = None


class SchemaResponse(Strict):
    action: Dict[str, Any]
    observation: Dict[str, Any]
    state: Dict[str, Any]


class StepResult(Strict):
    """ResetResponse and StepResponse have the same fields."""
    observation: Dict[str, Any]
    reward: Optional[float] = None
    done: bool = False


class State(BaseModel):
    model_config = ConfigDict(extra="allow")
    episode_id: Optional[str] = None
    step_count: int = Field(default=0, ge=0)


class ObservationBase(Strict):
    done: bool = False
    reward: Union[bool, int, float, None] = None
    metadata: Dict[str, Any] = Field(default_factory=dict)


class Tool(Strict):
    name: str
    description: str
    input_schema: Dict[str, Any]


class ListToolsObservation(ObservationBase):
    tools: List[Tool]


class ToolErrorType(str, Enum):
    execution_error = "execution_error"
    invalid_args = "invalid_args"
    transport_error = "transport_error"
    tool_not_found = "tool_not_found"
    timeout = "timeout"


class ToolError(Strict):
    error_type: ToolErrorType
    message: str


class CallToolObservation(ObservationBase):
    tool_name: str
    result: Any = None
    error: Optional[ToolError] = None


class ValidationDetail(BaseModel):
    type: str
    loc: List[Union[str, int]]
    msg: str


class HTTPValidationError(Strict):
    detail: List[ValidationDetail]


class WSObservationResponse(Strict):
    type: Literal["observation"]
    data: Dict[str, Any]


class WSStateResponse(Strict):
    type: Literal["state"]
    data: Dict[str, Any]


class WSErrorCode(str, Enum):
    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class WSErrorResponse(Strict):
    type: Literal["error"]
    data: Dict[str, Any]


class JsonRpcError(Strict):
    code: int
    message: str
    data: Optional[Any] = None


class JsonRpcResponse(Strict):
    jsonrpc: Literal["2.0"] = "2.0"
    result: Optional[Any] = None
    error: Optional[JsonRpcError] = None
    id: Optional[Union[str, int]] = None


class WSMCPResponse(Strict):
    type: str
    data: Dict[str, Any]


def check(kind: str, body: Any) -> None:
    if kind == "health":
        HealthResponse.model_validate(body)
    elif kind == "metadata":
        EnvironmentMetadata.model_validate(body)
    elif kind == "schema":
        SchemaResponse.model_validate(body)
    elif kind == "reset":
        StepResult.model_validate(body)
        # MCPToolClient keeps only "metadata" of an unknown observation.
        ObservationBase(metadata=body["observation"].get("metadata", {}))
    elif kind == "state":
        State.model_validate(body)
    elif kind == "list_tools":
        r = StepResult.model_validate(body)
        ListToolsObservation.model_validate(r.observation)
    elif kind == "call_tool":
        r = StepResult.model_validate(body)
        obs = CallToolObservation.model_validate(r.observation)
        assert (obs.result is None) != (obs.error is None), "exactly one of result and error"
        if obs.result is not None:
            assert set(obs.result) == {"content", "structured_content", "meta", "data", "is_error"}, obs.result
    elif kind == "http_422":
        HTTPValidationError.model_validate(body)
    elif kind == "ws_observation":
        m = WSObservationResponse.model_validate(body)
        StepResult.model_validate(m.data)
    elif kind == "ws_state":
        m = WSStateResponse.model_validate(body)
        State.model_validate(m.data)
    elif kind == "ws_error":
        m = WSErrorResponse.model_validate(body)
        WSErrorCode(m.data["code"])
        assert isinstance(m.data["message"], str)
    elif kind == "ws_mcp":
        m = WSMCPResponse.model_validate(body)
        r = JsonRpcResponse.model_validate(m.data)
        assert ("result" in m.data) != ("error" in m.data), "result or error, never both"
    else:
        raise ValueError(f"unknown kind {kind}")


def main() -> int:
    samples = json.load(sys.stdin)
    failed = 0
    for i, s in enumerate(samples):
        try:
            check(s["kind"], s["body"])
        except Exception as e:  # report every failure, not just the first
            failed += 1
            print(f"sample {i} ({s['kind']}): {e}\n  body: {json.dumps(s['body'])[:300]}")
    print(f"{len(samples) - failed} ok, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
