#!/usr/bin/env python3
"""A small MCP server on stdio (Python's standard library only): notes kept in a JSON file.

Tools: add_note(title, text), list_notes(), read_note(title). The file is NOTES_FILE (default
notes.json in the folder the server starts in: the run's workspace).
"""
import json
import os
import sys

NOTES = os.environ.get("NOTES_FILE", "notes.json")
TOOLS = [
    {
        "name": "add_note",
        "description": "Save a note under a title (replaces a note of the same title).",
        "inputSchema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "text": {"type": "string"}},
            "required": ["title", "text"],
        },
    },
    {
        "name": "list_notes",
        "description": "The titles of the saved notes.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "read_note",
        "description": "The text of the note with this title.",
        "inputSchema": {
            "type": "object",
            "properties": {"title": {"type": "string"}},
            "required": ["title"],
        },
    },
]


def load():
    try:
        with open(NOTES) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def call(name, args):
    notes = load()
    if name == "add_note":
        notes[args["title"]] = args["text"]
        with open(NOTES, "w") as f:
            json.dump(notes, f, indent=2)
        return f"saved {args['title']!r} ({len(notes)} notes)", False
    if name == "list_notes":
        return "\n".join(sorted(notes)) or "(no notes)", False
    if name == "read_note":
        if args["title"] not in notes:
            return f"no note titled {args['title']!r}", True
        return notes[args["title"]], False
    return f"unknown tool {name}", True


def answer(request):
    method, params = request["method"], request.get("params", {})
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "notes", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        text, failed = call(params["name"], params.get("arguments") or {})
        return {"content": [{"type": "text", "text": text}], "isError": failed}
    if method == "ping":
        return {}
    return None


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue  # a notification
    result = answer(message)
    if result is None:
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "method not found"}}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
