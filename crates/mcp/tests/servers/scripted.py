#!/usr/bin/env python3
"""A scripted MCP server on stdio (standard library only), for the mcp crate's tests.

It prints non-JSON noise on stdout (as servers that log there do), pages tools/list two tools at a
time, and checks that the client said notifications/initialized before anything else. Its tools:
  echo(text)        -> text
  fails()           -> isError result
  ping_me()         -> pings the client and asks it for roots/list, reports both answers
  change()          -> sends notifications/tools/list_changed, then answers
  crash()           -> exits with status 3 without answering
  hang()            -> never answers
  sleep(seconds)    -> answers after the delay
  cancelled()       -> the requestIds of every notifications/cancelled received so far
  media()           -> an image, a resource link and two embedded resources
  structured()      -> structuredContent only
"""
import json
import sys
import time

TOOLS = [
    {"name": n, "description": f"the {n} tool", "inputSchema": {"type": "object"}}
    for n in ["echo", "fails", "ping_me", "change", "crash", "hang", "sleep", "cancelled", "media", "structured"]
]
PAGE = 2
state = {"initialized": False, "cancelled": [], "next_id": 1000}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read():
    """The next JSON message from stdin, or None at its end; notifications are handled here."""
    for line in sys.stdin:
        message = json.loads(line)
        if "method" in message and "id" not in message:
            if message["method"] == "notifications/initialized":
                state["initialized"] = True
            elif message["method"] == "notifications/cancelled":
                state["cancelled"].append(message["params"]["requestId"])
            continue
        return message
    return None


def ask(method):
    """Sends a request to the client and returns its answer."""
    state["next_id"] += 1
    request_id = state["next_id"]
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}})
    while True:
        message = read()
        if message is None:
            sys.exit(0)
        if message.get("id") == request_id and "method" not in message:
            return message


def text(value, is_error=False):
    return {"content": [{"type": "text", "text": value}], "isError": is_error}


def call(name, arguments):
    if name == "echo":
        return text(arguments.get("text", ""))
    if name == "fails":
        return text("it failed", is_error=True)
    if name == "ping_me":
        pong = ask("ping")
        roots = ask("roots/list")
        return text(f"ping: {json.dumps(pong.get('result'))}; roots: {roots.get('error', {}).get('code')}")
    if name == "change":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("changed")
    if name == "crash":
        sys.stdout.flush()
        import os
        os._exit(3)
    if name == "hang":
        return None
    if name == "sleep":
        time.sleep(float(arguments.get("seconds", 0)))
        return text("slept")
    if name == "cancelled":
        return text(json.dumps(state["cancelled"]))
    if name == "media":
        return {"content": [
            {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUg==", "mimeType": "image/png"},
            {"type": "resource_link", "name": "notes", "uri": "file:///notes.txt", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "mem://a", "mimeType": "text/plain", "text": "inline text"}},
            {"type": "resource", "resource": {"uri": "mem://b", "mimeType": "application/zip", "blob": "UEsDBA=="}},
        ]}
    if name == "structured":
        return {"content": [], "structuredContent": {"sum": 3, "items": ["a", "b"]}}
    raise KeyError(name)


def handle(message):
    method = message.get("method")
    if method == "initialize":
        if message["params"].get("protocolVersion") != "2025-06-18":
            return {"error": {"code": -32602, "message": "unexpected protocolVersion"}}
        return {"result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": True}},
                           "serverInfo": {"name": "scripted", "version": "1"}}}
    if not state["initialized"]:
        return {"error": {"code": -32600, "message": f"{method} before notifications/initialized"}}
    if method == "tools/list":
        start = int((message.get("params") or {}).get("cursor", "0"))
        page = {"tools": TOOLS[start:start + PAGE]}
        if start + PAGE < len(TOOLS):
            page["nextCursor"] = str(start + PAGE)
        return {"result": page}
    if method == "tools/call":
        params = message["params"]
        try:
            result = call(params["name"], params.get("arguments") or {})
        except KeyError as e:
            return {"error": {"code": -32602, "message": f"unknown tool {e}"}}
        return None if result is None else {"result": result}
    return {"error": {"code": -32601, "message": f"no method {method}"}}


def main():
    print("scripted MCP server starting (this line is not JSON)", flush=True)
    while True:
        message = read()
        if message is None:
            return
        print(f"log: handling {message.get('method')}", flush=True)
        answer = handle(message)
        if answer is not None:
            send({"jsonrpc": "2.0", "id": message["id"], **answer})


if __name__ == "__main__":
    main()
