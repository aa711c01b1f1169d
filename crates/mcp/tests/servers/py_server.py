"""An MCP server written with the official Python SDK (`mcp` 1.x, FastMCP), for the mcp crate's tests.

    python py_server.py stdio
    python py_server.py http PORT     # streamable HTTP on http://127.0.0.1:PORT/mcp
"""
import os
import sys
from typing import TypedDict

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata

port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
server = FastMCP("py-test-server", host="127.0.0.1", port=port, log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def fail() -> str:
    """Always raises."""
    raise RuntimeError("this tool always fails")


@server.tool()
def crash() -> str:
    """Ends the server process at once, with status 3."""
    os._exit(3)


class Weather(TypedDict):
    city: str
    temperature: int


@server.tool()
def structured() -> Weather:
    """Returns a typed dictionary (structured content, with an output schema)."""
    return {"city": "Paris", "temperature": 21}


@server.tool()
async def roundtrip(ctx: Context) -> str:
    """Pings the client and asks it for its roots; reports what it answered.

    Over HTTP the ping is tied to this call (it travels in the call's event stream); roots/list is
    not (it travels in the stream the client opened with a GET)."""
    await ctx.session.send_request(
        types.ServerRequest(types.PingRequest()),
        types.EmptyResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    try:
        await ctx.session.list_roots()
        roots = "answered"
    except McpError as e:
        roots = f"error {e.error.code}"
    return f"ping ok; roots: {roots}"


@server.tool()
def getenv(name: str) -> str:
    """Returns the value of an environment variable of the server (and says it on stderr)."""
    value = os.environ.get(name, "")
    print(f"getenv {name}={value}", file=sys.stderr, flush=True)
    return value


def late() -> str:
    """A tool added at runtime."""
    return "late"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool `late` and tells the client its tool list changed (over HTTP, in the stream the
    client opened with a GET: the notification is tied to no request)."""
    server.add_tool(late)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    server.run(transport="streamable-http" if transport == "http" else "stdio")
