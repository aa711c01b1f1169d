#!/usr/bin/env python3
"""A stdio MCP server that misbehaves on purpose (standard library only), for the tests of the
client's bounds. Its first argument says how:

  big-line        tools/call of `big` with {"mib": N} answers with one line of N MiB (a text result);
                  any other tools/call answers with the tool's name
  ping-flood      serves `echo`, but its tools/call sends pings as fast as it can and never reads its
                  stdin again
  stderr-flood N  before answering initialize, writes "first line", then N MiB of 1 KiB lines, then
                  one line of 10 MiB, then "after the flood" to its standard error; then serves
                  `echo` (answers "ok")
"""
import json
import sys

MIB = 1024 * 1024
INITIALIZED = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
               "serverInfo": {"name": "unruly", "version": "1"}}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def messages():
    """The requests on stdin (notifications skipped)."""
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message:
            yield message


def big_line(request_id, mib):
    """One answer line of `mib` MiB, written a MiB at a time."""
    out = sys.stdout
    out.write('{"jsonrpc": "2.0", "id": %d, "result": {"content": [{"type": "text", "text": "' % request_id)
    chunk = "x" * MIB
    for _ in range(mib):
        out.write(chunk)
    out.write('"}]}}\n')
    out.flush()


def serve(call):
    """Answers initialize, tools/list (one tool, `echo`) and tools/call through `call`."""
    for message in messages():
        method = message["method"]
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": INITIALIZED})
        elif method == "tools/list":
            tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}})
        elif method == "tools/call":
            call(message)


def big_line_call(message):
    params = message["params"]
    if params["name"] == "big":
        big_line(message["id"], int(params["arguments"]["mib"]))
    else:
        result = {"content": [{"type": "text", "text": params["name"]}]}
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})


def ping_flood(_message):
    """Pings the client forever, a thousand a write, reading nothing more."""
    n = 0
    while True:
        batch = []
        for _ in range(1000):
            n += 1
            batch.append(json.dumps({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"}))
        sys.stdout.write("\n".join(batch) + "\n")
        sys.stdout.flush()


def stderr_flood(mib):
    err = sys.stderr.buffer
    err.write(b"first line\n")
    line = b"l" * 1023 + b"\n"
    for _ in range(mib):
        err.write(line * 1024)
    err.write(b"w" * (10 * MIB) + b"\n")
    err.write(b"after the flood\n")
    err.flush()
    serve(lambda m: send({"jsonrpc": "2.0", "id": m["id"],
                          "result": {"content": [{"type": "text", "text": "ok"}]}}))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "big-line":
        serve(big_line_call)
    elif mode == "ping-flood":
        serve(ping_flood)
    elif mode == "stderr-flood":
        stderr_flood(int(sys.argv[2]))
    else:
        sys.exit(f"unknown mode {mode}")
