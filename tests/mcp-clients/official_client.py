"""Drives one of our MCP servers with the official Python SDK, as an agent's client would.

    official_client.py stdio|http TARGET SCRIPT

TARGET is the server's command line as a JSON array (stdio; run in the current folder with this
process's environment) or its URL (http). SCRIPT is a JSON list of steps; each step calls one tool, over one session:

    {"tool": NAME, "arguments": {...}, "until": {"path": "a/b", "in": [..]}, "carry": {"arg": "a/b"},
     "progress": true}

`until` repeats the call (at most 50 times) until the value at `path` of its structured content is
one of `in`; `carry` adds to the arguments of this and later calls values taken from the last
result (so the first call can start an execution and the next ones name it). With `progress` the
call asks for progress notifications and the step records them. Prints one JSON object: the tool
names, and each step's last result and the progress it saw. A tool error ends the script with
exit 1 and its text on stderr.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


def at(value, path):
    for key in path.split("/"):
        value = value[key] if isinstance(value, dict) else value[int(key)]
    return value


async def run_script(session, script):
    await session.initialize()
    tools = await session.list_tools()
    out = {"tools": [t.name for t in tools.tools], "steps": []}
    carried = {}
    for step in script:
        seen = []

        async def progress(done, total, message):
            seen.append({"progress": done, "total": total, "message": message})

        for _ in range(50):
            arguments = dict(step.get("arguments", {}))
            arguments.update(carried)
            result = await session.call_tool(
                step["tool"],
                arguments,
                progress_callback=progress if step.get("progress") else None,
            )
            if result.isError:
                print(result.content[0].text, file=sys.stderr)
                sys.exit(1)
            content = result.structuredContent
            for name, path in step.get("carry", {}).items():
                carried[name] = at(content, path)
            until = step.get("until")
            if until is None or at(content, until["path"]) in until["in"]:
                break
        out["steps"].append({"result": content, "progress": seen})
    return out


async def main():
    mode, target, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if mode == "stdio":
        command = json.loads(target)
        params = StdioServerParameters(
            command=command[0], args=command[1:], env=dict(os.environ)
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                out = await run_script(session, script)
    else:
        async with streamablehttp_client(target) as (read, write, _):
            async with ClientSession(read, write) as session:
                out = await run_script(session, script)
    print(json.dumps(out))


asyncio.run(main())
