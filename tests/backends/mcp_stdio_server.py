"""A small MCP server over stdio (newline-delimited JSON-RPC): one tool and instructions,
enough for Claude Code to list its deferred tool and its instructions (the setup tests)."""

import json
import sys

for line in sys.stdin:
    msg = json.loads(line)
    mid = msg.get("id")
    method = msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {
            "protocolVersion": msg["params"].get("protocolVersion", "2024-11-05"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "ledger", "version": "1.0"},
            "instructions": "LEDGER-INSTRUCTIONS use the ledger tools for invoices",
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {
                    "name": "lookup_invoice",
                    "description": "Find an invoice by number.",
                    "inputSchema": {"type": "object", "properties": {"number": {"type": "string"}}},
                }
            ]
        }
    else:
        print(
            json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no"}}),
            flush=True,
        )
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
