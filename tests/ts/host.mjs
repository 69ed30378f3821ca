// A small TypeScript Agent SDK application for claudetrace's end-to-end test.
//
//   node host.mjs CLI_PATH [PROMPT]      (or CLAUDE_CLI_PATH / HOST_PROMPT in the environment)
//
// Runs one query() against the given Claude Code executable with a canUseTool
// callback that allows every tool and an in-process SDK MCP tool (calc/add).
// Prints one JSON line per event on stdout: {"message": …} for every SDK
// message, {"callback": "can_use_tool" | "add", …} when a callback runs, and
// {"error": "…"} if the query fails (then the exit status is 1); HOST_TIMEOUT_MS
// aborts the query after that long.  The CLI's
// environment is this process's (the test points it at a fake API).

import { createSdkMcpServer, query, tool } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const cliPath = process.argv[2] ?? process.env.CLAUDE_CLI_PATH;
const prompt = process.argv[3] ?? process.env.HOST_PROMPT ?? "Add 2 and 40 with the calc tool.";
if (!cliPath) {
  process.stderr.write("usage: node host.mjs CLI_PATH [PROMPT]\n");
  process.exit(2);
}

const emit = (record) => process.stdout.write(JSON.stringify(record) + "\n");

const calc = createSdkMcpServer({
  name: "calc",
  version: "1.0.0",
  tools: [
    tool("add", "Add two numbers", { a: z.number(), b: z.number() }, async ({ a, b }) => {
      emit({ callback: "add", args: { a, b } });
      return { content: [{ type: "text", text: String(a + b) }] };
    }),
  ],
});

async function canUseTool(toolName, input) {
  emit({ callback: "can_use_tool", tool: toolName, input });
  return { behavior: "allow", updatedInput: input };
}

// HOST_TIMEOUT_MS: give up on the CLI after that long (the SDK then kills it).
const abortController = new AbortController();
if (process.env.HOST_TIMEOUT_MS) {
  setTimeout(() => abortController.abort(), Number(process.env.HOST_TIMEOUT_MS)).unref();
}

try {
  for await (const message of query({
    prompt,
    options: {
      abortController,
      pathToClaudeCodeExecutable: cliPath,
      cwd: process.cwd(),
      canUseTool,
      mcpServers: { calc },
      stderr: () => {},
    },
  })) {
    emit({ message });
  }
} catch (err) {
  emit({ error: String(err?.message ?? err) });
  process.exitCode = 1;
}
