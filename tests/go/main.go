// A Go host of the Claude Code CLI for claudetrace's end-to-end tests.
//
//	gohost -cli PATH [-scenario plain|mcp|deny] [-prompt TEXT] [-delay 0s] [-jitter 20ms] [-timeout 60s] [-otel]
//
// It drives the CLI the way the Go Agent SDKs do: CLAUDE_CODE_ENTRYPOINT=sdk-go,
// --setting-sources "", --input-format stream-json last, streaming input with the
// control protocol (initialize, can_use_tool, hook_callback, mcp_message), and an
// in-process SDK MCP server ("calc", tool "add") served by mark3labs/mcp-go whose
// JSON-RPC messages travel inside mcp_message control requests.  Every control
// request is answered on its own goroutine, as Go SDKs do, so answers may leave
// in any order; -jitter adds a random pause before each answer to shuffle them,
// -delay a fixed one (the CLI then has several requests out at once).
//
// It prints one JSON line per event on stdout: {"message": …} for every CLI
// message the SDK would hand the application, {"callback": …} when a callback
// runs, {"error": "…"} when something fails (exit status 1), and last
// {"cli_exit": N}.  The CLI inherits this process's environment.
//
// With -otel the host traces itself with the OpenTelemetry Go SDK (OTLP over HTTP
// to OTEL_EXPORTER_OTLP_ENDPOINT): one span, "gohost session", around the whole
// session, whose W3C trace context it gives the CLI as TRACEPARENT, as a Go SDK's
// env option lets an application do; it prints {"trace": {"trace_id", "span_id"}}.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// emitter writes the host's JSON lines; callbacks run on several goroutines.
type emitter struct {
	mu  sync.Mutex
	out io.Writer
}

func (e *emitter) emit(record map[string]any) {
	line, err := json.Marshal(record)
	if err != nil {
		line, _ = json.Marshal(map[string]any{"error": err.Error()})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.out.Write(append(line, '\n'))
}

// host is one session with the CLI.
type host struct {
	scenario string
	delay    time.Duration
	jitter   time.Duration
	out      *emitter

	writeMu sync.Mutex
	stdin   io.WriteCloser
	closed  bool

	pendingMu sync.Mutex
	pending   map[string]chan map[string]any
	counter   int

	mcp *server.MCPServer
}

func newRequestID(counter int) string {
	buf := make([]byte, 4)
	if _, err := rand.Read(buf); err != nil {
		panic(err)
	}
	return fmt.Sprintf("req_%d_%s", counter, hex.EncodeToString(buf))
}

func (h *host) write(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if h.closed {
		return errors.New("stdin already closed")
	}
	_, err = h.stdin.Write(append(line, '\n'))
	return err
}

func (h *host) closeInput() {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	if !h.closed {
		h.closed = true
		h.stdin.Close()
	}
}

// request sends a host-initiated control request and waits for its response.
func (h *host) request(ctx context.Context, body map[string]any) (map[string]any, error) {
	h.pendingMu.Lock()
	h.counter++
	id := newRequestID(h.counter)
	ch := make(chan map[string]any, 1)
	h.pending[id] = ch
	h.pendingMu.Unlock()
	err := h.write(map[string]any{"type": "control_request", "request_id": id, "request": body})
	if err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		if resp["subtype"] == "error" {
			return nil, fmt.Errorf("control request %s failed: %v", body["subtype"], resp["error"])
		}
		return resp, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer to %s: %w", body["subtype"], ctx.Err())
	}
}

func (h *host) resolve(resp map[string]any) {
	id, _ := resp["request_id"].(string)
	h.pendingMu.Lock()
	ch, ok := h.pending[id]
	delete(h.pending, id)
	h.pendingMu.Unlock()
	if ok {
		ch <- resp
	}
}

// answer handles one CLI-initiated control request (on its own goroutine).
func (h *host) answer(ctx context.Context, msg map[string]any) {
	id, _ := msg["request_id"].(string)
	req, _ := msg["request"].(map[string]any)
	pause := h.delay
	if h.jitter > 0 {
		pause += time.Duration(mathrand.Int64N(int64(h.jitter)))
	}
	time.Sleep(pause)
	data, err := h.handle(ctx, req)
	var response map[string]any
	if err != nil {
		response = map[string]any{"subtype": "error", "request_id": id, "error": err.Error()}
	} else {
		response = map[string]any{"subtype": "success", "request_id": id, "response": data}
	}
	if err := h.write(map[string]any{"type": "control_response", "response": response}); err != nil {
		h.out.emit(map[string]any{"error": "answering " + id + ": " + err.Error()})
	}
}

func (h *host) handle(ctx context.Context, req map[string]any) (map[string]any, error) {
	switch req["subtype"] {
	case "can_use_tool":
		tool, _ := req["tool_name"].(string)
		input, _ := req["input"].(map[string]any)
		h.out.emit(map[string]any{"callback": "can_use_tool", "tool": tool, "input": input})
		if h.scenario == "deny" {
			return map[string]any{"behavior": "deny", "message": "The Go host denies " + tool + "."}, nil
		}
		return map[string]any{"behavior": "allow", "updatedInput": input}, nil
	case "hook_callback":
		input, _ := req["input"].(map[string]any)
		h.out.emit(map[string]any{
			"callback": "hook",
			"id":       req["callback_id"],
			"event":    input["hook_event_name"],
			"tool":     input["tool_name"],
		})
		return map[string]any{}, nil
	case "mcp_message":
		name, _ := req["server_name"].(string)
		if name != "calc" || h.mcp == nil {
			return nil, fmt.Errorf("no SDK MCP server named %q", name)
		}
		raw, err := json.Marshal(req["message"])
		if err != nil {
			return nil, err
		}
		var reply any = h.mcp.HandleMessage(ctx, raw)
		if reply == nil {
			// A notification has no JSON-RPC reply; its control request still wants one.
			reply = map[string]any{"jsonrpc": "2.0", "result": map[string]any{}}
		}
		return map[string]any{"mcp_response": reply}, nil
	default:
		return nil, fmt.Errorf("unsupported control request %v", req["subtype"])
	}
}

func calcServer(out *emitter) *server.MCPServer {
	s := server.NewMCPServer("calc", "1.0.0", server.WithToolCapabilities(false))
	add := mcp.NewTool("add",
		mcp.WithDescription("Add two numbers"),
		// Read-only: the CLI may run several calls of it at once.
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithNumber("a", mcp.Required()),
		mcp.WithNumber("b", mcp.Required()),
	)
	s.AddTool(add, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := req.RequireFloat("a")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		b, err := req.RequireFloat("b")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		out.emit(map[string]any{"callback": "add", "args": map[string]any{"a": a, "b": b}})
		return mcp.NewToolResultText(strconv.FormatFloat(a+b, 'f', -1, 64)), nil
	})
	return s
}

// argv is the CLI's command line, in the order Go SDK hosts use.
func argv(scenario string) []string {
	args := []string{"--output-format", "stream-json", "--verbose", "--setting-sources", ""}
	args = append(args, "--permission-prompt-tool", "stdio")
	if scenario == "mcp" {
		// The CLI hangs without output when an SDK server's entry lacks "name".
		config := `{"mcpServers":{"calc":{"type":"sdk","name":"calc"}}}`
		args = append(args, "--mcp-config", config)
	}
	return append(args, "--input-format", "stream-json")
}

func (h *host) initialize() map[string]any {
	request := map[string]any{"subtype": "initialize", "hooks": nil}
	if h.scenario == "mcp" {
		request["hooks"] = map[string]any{
			"PreToolUse": []any{map[string]any{"matcher": nil, "hookCallbackIds": []string{"hook_0"}}},
		}
	}
	return request
}

// tracing starts the host's own span; the returned function ends it and flushes.
func tracing(ctx context.Context, out *emitter) (context.Context, func(), error) {
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return ctx, nil, err
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("gohost"))),
	)
	ctx, span := provider.Tracer("claudetrace.test/gohost").Start(ctx, "gohost session",
		trace.WithSpanKind(trace.SpanKindClient))
	ids := span.SpanContext()
	out.emit(map[string]any{"trace": map[string]any{
		"trace_id": ids.TraceID().String(), "span_id": ids.SpanID().String(),
	}})
	return ctx, func() {
		span.End()
		flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := provider.Shutdown(flush); err != nil {
			out.emit(map[string]any{"error": "exporting the host's span: " + err.Error()})
		}
	}, nil
}

func run(cliPath, scenario, prompt string, delay, jitter, timeout time.Duration, traced bool, out *emitter) int {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	env := append(os.Environ(), "CLAUDE_CODE_ENTRYPOINT=sdk-go")
	if traced {
		traceCtx, end, err := tracing(ctx, out)
		if err != nil {
			out.emit(map[string]any{"error": "tracing: " + err.Error()})
			return 1
		}
		defer end()
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(traceCtx, carrier)
		env = append(env, "TRACEPARENT="+carrier.Get("traceparent"))
	}
	cmd := exec.Command(cliPath, argv(scenario)...)
	cmd.Env = env
	cmd.Stderr = os.Stderr // a replay's divergence report, the CLI's own errors
	stdin, err := cmd.StdinPipe()
	if err != nil {
		out.emit(map[string]any{"error": err.Error()})
		return 1
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		out.emit(map[string]any{"error": err.Error()})
		return 1
	}
	if err := cmd.Start(); err != nil {
		out.emit(map[string]any{"error": err.Error()})
		return 1
	}
	h := &host{
		scenario: scenario,
		delay:    delay,
		jitter:   jitter,
		out:      out,
		stdin:    stdin,
		pending:  map[string]chan map[string]any{},
	}
	if scenario == "mcp" {
		h.mcp = calcServer(out)
	}

	var answers sync.WaitGroup
	failed := false
	results := make(chan struct{}, 1)
	readDone := make(chan error, 1)
	go func() {
		reader := bufio.NewReaderSize(stdout, 1<<20)
		for {
			line, err := reader.ReadBytes('\n')
			if len(line) > 0 {
				var msg map[string]any
				if jerr := json.Unmarshal(line, &msg); jerr != nil {
					out.emit(map[string]any{"error": "unparsable CLI line: " + jerr.Error()})
				} else {
					switch msg["type"] {
					case "control_request":
						answers.Add(1)
						go func() { defer answers.Done(); h.answer(ctx, msg) }()
					case "control_response":
						resp, _ := msg["response"].(map[string]any)
						h.resolve(resp)
					case "control_cancel_request":
					default:
						out.emit(map[string]any{"message": json.RawMessage(line)})
						if msg["type"] == "result" {
							select {
							case results <- struct{}{}:
							default:
							}
						}
					}
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readDone <- err
				return
			}
		}
	}()

	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
		case <-exited:
		}
	}()

	if _, err := h.request(ctx, h.initialize()); err != nil {
		out.emit(map[string]any{"error": err.Error()})
		failed = true
	} else {
		user := map[string]any{
			"type":               "user",
			"message":            map[string]any{"role": "user", "content": prompt},
			"parent_tool_use_id": nil,
			"session_id":         "default",
		}
		if err := h.write(user); err != nil {
			out.emit(map[string]any{"error": err.Error()})
			failed = true
		} else {
			select {
			case <-results:
			case err := <-readDone:
				readDone <- err
			case <-ctx.Done():
			}
		}
	}
	answers.Wait()
	h.closeInput()
	if err := <-readDone; err != nil {
		out.emit(map[string]any{"error": "reading the CLI: " + err.Error()})
		failed = true
	}
	waitErr := cmd.Wait()
	close(exited)
	code := cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		out.emit(map[string]any{"error": "timed out after " + timeout.String()})
		failed = true
	} else if waitErr != nil {
		out.emit(map[string]any{"error": "the CLI failed: " + waitErr.Error()})
		failed = true
	}
	out.emit(map[string]any{"cli_exit": code})
	if failed {
		return 1
	}
	return 0
}

func main() {
	cliPath := flag.String("cli", os.Getenv("CLAUDE_CLI_PATH"), "the claude executable (or a claudetrace shim)")
	scenario := flag.String("scenario", "plain", "plain, mcp (SDK MCP server calc and a PreToolUse hook) or deny (can_use_tool denies)")
	prompt := flag.String("prompt", "Say hello.", "the user message")
	delay := flag.Duration("delay", 0, "pause this long before answering each control request")
	jitter := flag.Duration("jitter", 0, "pause up to this long more, at random, before answering each control request")
	timeout := flag.Duration("timeout", 60*time.Second, "give up on the CLI after this long")
	traced := flag.Bool("otel", false, "trace the session (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT) and give the CLI its TRACEPARENT")
	flag.Parse()
	if *cliPath == "" {
		fmt.Fprintln(os.Stderr, "usage: gohost -cli PATH [-scenario plain|mcp|deny] [-prompt TEXT]")
		os.Exit(2)
	}
	switch *scenario {
	case "plain", "mcp", "deny":
	default:
		fmt.Fprintf(os.Stderr, "gohost: unknown scenario %q\n", *scenario)
		os.Exit(2)
	}
	os.Exit(run(*cliPath, *scenario, *prompt, *delay, *jitter, *timeout, *traced, &emitter{out: os.Stdout}))
}
