#!/usr/bin/env python3
"""An agent loop over MCP: speaks JSON-RPC 2.0 to `tessel mcp` on stdio (plain Python 3).

This is what an MCP host (Claude Desktop, an agent framework) does on the
model's behalf: initialize, list the tools, call them, read resources. The
"model" here is scripted: it reads the space, enqueues an idea, lets tessel
run on the simulator with progress notifications, asks why the best is slow,
and reads the report resource. A bad call shows the error a model would see.

  python3 examples/mcp_agent_loop.py --tessel build/ci/src/cli/tessel
"""
import argparse
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


class McpClient:
    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.next_id = 0

    def request(self, method, params=None, on_progress=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit("tessel mcp ended unexpectedly")
            reply = json.loads(line)
            if reply.get("method") == "notifications/progress":
                if on_progress:
                    on_progress(reply["params"])
                continue
            if reply.get("id") == self.next_id:
                return reply

    def notify(self, method):
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def call_tool(self, name, arguments=None, progress=False):
        params = {"name": name, "arguments": arguments or {}}
        on_progress = None
        if progress:
            params["_meta"] = {"progressToken": f"{name}-{self.next_id + 1}"}
            on_progress = lambda p: print(f"  progress {p['progress']:.0f}/{p['total']:.0f}: {p['message']}")
        reply = self.request("tools/call", params, on_progress)
        if "error" in reply:
            raise RuntimeError(f"JSON-RPC error {reply['error']['code']}: {reply['error']['message']}")
        return reply["result"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tessel", default="build/ci/src/cli/tessel")
    parser.add_argument("--space", default=str(HERE / "sim_matmul.tsl"))
    parser.add_argument("--evaluations", type=int, default=8)
    args = parser.parse_args()

    client = McpClient([args.tessel, "mcp", args.space, "--backend", "sim", "--no-db", "--seed", "1"])
    init = client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": {"name": "mcp_agent_loop", "version": "1"}})
    client.notify("notifications/initialized")
    print("server:", init["result"]["serverInfo"]["name"], init["result"]["protocolVersion"])
    print("instructions:", init["result"]["instructions"])
    tools = client.request("tools/list")["result"]["tools"]
    print("tools:", ", ".join(t["name"] for t in tools))

    space = client.call_tool("space")["structuredContent"]["space"]
    print(f"space {space['name']}: {space['valid_configs']} valid configs")

    idea = client.call_tool("enqueue", {"config": {"tile_m": 128, "tile_n": 512, "tile_k": 128},
                                        "tokens": 250, "note": "one PSUM bank per tile"})
    print("enqueue ->", idea["structuredContent"])

    print(f"run {args.evaluations} evaluations:")
    run = client.call_tool("run", {"evaluations": args.evaluations}, progress=True)
    best = run["structuredContent"]["best"]
    print(f"best trial {best['trial_id']} ({best['source']}): {best['objective']:.4g} s")

    explanation = client.call_tool("explain")["structuredContent"]["explanation"]
    print("bottleneck:", explanation["bottleneck"])
    for line in explanation["suggestions"][:3]:
        print("  -", line)

    bad = client.call_tool("evaluate", {"config": {"tile_m": 7}})
    print("a bad call -> isError:", bad["isError"], "|", bad["content"][0]["text"])

    report = client.request("resources/read", {"uri": "tessel://study/report"})["result"]
    print(report["contents"][0]["text"])
    client.close()


if __name__ == "__main__":
    main()
