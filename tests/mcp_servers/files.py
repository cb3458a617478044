"""A filesystem MCP server shaped like the reference one, confined to one directory.

It offers the same kind of tool set a user gets from the reference filesystem server: tools that
only read next to tools that write, edit, move and create, all with descriptions that talk about
files. That mix is what a rule-based model must choose from without touching anything it was not
asked to touch. Text results come back as plain text, as the reference server sends them.

Run as `python -m tests.mcp_servers.files ROOT [LOG]`: relative paths are relative to ROOT, a path
that leaves ROOT is refused, and every call is appended to LOG (kept outside ROOT) as one JSON line,
so a test can tell exactly which tools ran.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

ROOT = Path(".").resolve()
LOG: Path | None = None
server = MCPServer("files", log_level="WARNING")
# Annotated as the reference server annotates its tools: readers read-only, writers not.
READ_ONLY = ToolAnnotations(read_only_hint=True)
OVERWRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)
EDITS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)
CREATES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
MOVES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)


def _record(tool: str, **arguments: Any) -> None:
    if LOG is not None:
        with LOG.open("a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


def _inside(path: str) -> Path:
    resolved = (ROOT / path).resolve()
    if resolved != ROOT and ROOT not in resolved.parents:
        raise ToolError(f"Access denied: {path} is outside the allowed directory {ROOT}")
    return resolved


@server.tool(structured_output=False, annotations=READ_ONLY)
def read_file(path: str) -> str:
    """Read a whole text file and return what it contains. Use it to look at one file's contents.
    Works only inside the allowed directory."""
    _record("read_file", path=path)
    return _inside(path).read_text(encoding="utf-8")


@server.tool(structured_output=False, annotations=READ_ONLY)
def read_multiple_files(paths: list[str]) -> str:
    """Read several files in one go; each file's contents come back under its path, and a file
    that cannot be read does not stop the others. Works only inside the allowed directory."""
    _record("read_multiple_files", paths=paths)
    return "\n---\n".join(f"{p}:\n{_inside(p).read_text(encoding='utf-8')}" for p in paths)


@server.tool(structured_output=False, annotations=OVERWRITES)
def write_file(path: str, content: str) -> str:
    """Create a file, or overwrite an existing file completely, with new content. Careful: an
    existing file is replaced without asking. Works only inside the allowed directory."""
    _record("write_file", path=path, content=content)
    _inside(path).write_text(content, encoding="utf-8")
    return f"Wrote {path}"


@server.tool(structured_output=False, annotations=EDITS)
def edit_file(path: str, old_text: str, new_text: str) -> str:
    """Make a line-based edit in a text file: replace exact text with new text, and return a
    diff of the change. Works only inside the allowed directory."""
    _record("edit_file", path=path, old_text=old_text, new_text=new_text)
    target = _inside(path)
    target.write_text(target.read_text(encoding="utf-8").replace(old_text, new_text), encoding="utf-8")
    return f"Edited {path}"


@server.tool(structured_output=False, annotations=CREATES)
def create_directory(path: str) -> str:
    """Create a directory, with any missing parent folders; succeeds quietly when it already
    exists. Works only inside the allowed directory."""
    _record("create_directory", path=path)
    _inside(path).mkdir(parents=True, exist_ok=True)
    return f"Created {path}"


@server.tool(structured_output=False, annotations=READ_ONLY)
def list_directory(path: str) -> str:
    """List the files and folders in a directory, each marked [FILE] or [DIR]. Useful to see what
    a folder holds and to find a file in it. Works only inside the allowed directory."""
    _record("list_directory", path=path)
    entries = sorted(_inside(path).iterdir())
    return "\n".join(f"{'[DIR]' if e.is_dir() else '[FILE]'} {e.name}" for e in entries)


@server.tool(structured_output=False, annotations=MOVES)
def move_file(source: str, destination: str) -> str:
    """Move or rename a file or directory, also across folders; fails when the destination
    exists. Both paths must be inside the allowed directory."""
    _record("move_file", source=source, destination=destination)
    _inside(source).rename(_inside(destination))
    return f"Moved {source} to {destination}"


@server.tool(structured_output=False, annotations=READ_ONLY)
def search_files(path: str, pattern: str) -> str:
    """Search a folder and all its subfolders for files and directories whose names contain a
    pattern (case-insensitive), and return their paths. Works only inside the allowed directory."""
    _record("search_files", path=path, pattern=pattern)
    found = [p for p in _inside(path).rglob("*") if pattern.lower() in p.name.lower()]
    return "\n".join(str(p.relative_to(ROOT)) for p in sorted(found)) or "No matches found"


@server.tool(annotations=READ_ONLY)
def get_file_info(path: str) -> dict[str, Any]:
    """Details about a file or directory without reading it: size, creation and modification
    times, permissions and type. Works only inside the allowed directory."""
    _record("get_file_info", path=path)
    target = _inside(path)
    stat = target.stat()
    kind = "directory" if target.is_dir() else "file"
    return {
        "size": stat.st_size,
        "modified": stat.st_mtime,
        "permissions": oct(stat.st_mode)[-3:],
        "type": kind,
    }


@server.tool(structured_output=False, annotations=READ_ONLY)
def list_allowed_directories() -> str:
    """The directories this server may access. Call it to learn where files can be read."""
    _record("list_allowed_directories")
    return str(ROOT)


def main() -> None:
    global ROOT, LOG
    ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    LOG = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server.run("stdio")


if __name__ == "__main__":
    main()
