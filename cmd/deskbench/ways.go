package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// wayCall is one tool call an agent makes; turn says which model turn sends
// it (calls of one turn are sent together, as parallel tool use).
type wayCall struct {
	turn int
	tool string
	args map[string]any
}

// way is one way to solve a task: the calls a competent agent sends.
type way struct {
	name, note string
	calls      []wayCall
}

// todoWays solve the example task edit-todo (add "buy milk" to the list in
// the editor and save) the ways deskenv offers. Every way starts blind: the
// agent's first turn looks at the screen. The model's last turn, which only
// says it is done, is the same for all and not counted.
func todoWays() []way {
	save := `key("ctrl+End")
type("buy milk")
key("ctrl+s")
`
	return []way{
		{name: "tools", note: "one granular tool per action; each action answers with the settled screenshot", calls: []wayCall{
			{1, "screenshot", map[string]any{}},
			{2, "key", map[string]any{"text": "ctrl+End"}},
			{3, "type", map[string]any{"text": "buy milk"}},
			{4, "key", map[string]any{"text": "ctrl+s"}},
		}},
		{name: "tools, batched", note: "the same tools, the three actions sent as parallel tool use in one turn, screenshots off but the last", calls: []wayCall{
			{1, "screenshot", map[string]any{}},
			{2, "key", map[string]any{"text": "ctrl+End", "screenshot": false}},
			{2, "type", map[string]any{"text": "buy milk", "screenshot": false}},
			{2, "key", map[string]any{"text": "ctrl+s"}},
		}},
		{name: "computer", note: "Anthropic's computer tool; each action answers with the settled screenshot", calls: []wayCall{
			{1, "computer", map[string]any{"action": "screenshot"}},
			{2, "computer", map[string]any{"action": "key", "text": "ctrl+End"}},
			{3, "computer", map[string]any{"action": "type", "text": "buy milk"}},
			{4, "computer", map[string]any{"action": "key", "text": "ctrl+s"}},
		}},
		{name: "codeact", note: "run_script: look, then act and look again in one script", calls: []wayCall{
			{1, "run_script", map[string]any{"script": "show(screenshot())"}},
			{2, "run_script", map[string]any{"script": save + "show(screenshot())"}},
		}},
		{name: "codeact + files", note: "run_script with the files trait: the script checks the saved file itself and prints it instead of an image", calls: []wayCall{
			{1, "run_script", map[string]any{"script": "show(screenshot())"}},
			{2, "run_script", map[string]any{"script": save + `for i in range(50):
    text = read_file("todo.txt")
    if "buy milk" in text:
        break
    wait(0.1)
print(text)
`}},
		}},
	}
}

// wayResult is one run of one way.
type wayResult struct {
	calls, turns, images int
	obsBytes             int // text bytes plus base64 image bytes the model reads
	textBytes            int // of which text
	callTime             time.Duration
	reward               float64
}

// runWays solves one task several ways through MCP on one appliance and
// counts what each way costs the agent: tool calls, turns, observation.
func runWays(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("deskbench ways", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "deskenv binary (default: build ./cmd/deskenv)")
	reps := fs.Int("reps", 3, "runs of each way (each after a reset into the task)")
	tasks := fs.String("tasks", "tasks", "the example tasks directory (edit-todo is used)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reps < 1 {
		return fmt.Errorf("-reps %d: at least 1", *reps)
	}
	dir, err := tempDir("deskbench-ways")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bin, err = buildDeskenv(ctx, *bin, dir); err != nil {
		return err
	}
	app, err := startAppliance(ctx, *bin, time.Minute, "--home", filepath.Join(dir, "home"), "--tasks", *tasks,
		"--apps", "", "--no-stream", "--mcp-tools", "tools,computer,codeact", "--mcp-traits", "files")
	if err != nil {
		return err
	}
	defer app.stop()
	c, err := dialMCP(ctx, app.base+"/mcp")
	if err != nil {
		return err
	}
	defer c.Close()

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "way\ttool calls\tturns\timages\tobservation bytes\tof which text\t~image tokens\ttool time p50\treward")
	for _, w := range todoWays() {
		var runs []wayResult
		for range *reps {
			r, err := runWay(ctx, app.base, c, w)
			if err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			runs = append(runs, r)
		}
		sort.Slice(runs, func(a, b int) bool { return runs[a].callTime < runs[b].callTime })
		r := runs[len(runs)/2]
		rewards := make([]string, len(runs))
		for i, x := range runs {
			rewards[i] = fmt.Sprint(x.reward)
		}
		// Anthropic's vision docs estimate an image at width*height/750
		// tokens; every image here is the 1280x800 model space, or less.
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f ms\t%s\n", w.name, r.calls, r.turns, r.images, r.obsBytes, r.textBytes,
			r.images*1280*800/750, float64(r.callTime)/1e6, strings.Join(rewards, ","))
	}
	return tw.Flush()
}

// runWay resets into edit-todo, sends the way's calls, and ends the episode
// for its reward.
func runWay(ctx context.Context, base string, c *client.Client, w way) (wayResult, error) {
	var ep struct {
		ID     string   `json:"episode_id"`
		Reward *float64 `json:"reward"`
	}
	if err := postJSON(ctx, base+"/api/reset", map[string]any{"task_id": "edit-todo"}, &ep); err != nil {
		return wayResult{}, fmt.Errorf("reset: %w", err)
	}
	var r wayResult
	turns := map[int]bool{}
	for _, call := range w.calls {
		req := mcp.CallToolRequest{}
		req.Params.Name = call.tool
		req.Params.Arguments = call.args
		t0 := time.Now()
		res, err := c.CallTool(ctx, req)
		r.callTime += time.Since(t0)
		if err != nil {
			return r, fmt.Errorf("%s: %w", call.tool, err)
		}
		r.calls++
		turns[call.turn] = true
		for _, content := range res.Content {
			switch x := content.(type) {
			case mcp.TextContent:
				r.obsBytes += len(x.Text)
				r.textBytes += len(x.Text)
			case mcp.ImageContent:
				r.obsBytes += len(x.Data)
				r.images++
			}
		}
		if res.IsError {
			return r, fmt.Errorf("%s answered an error: %+v", call.tool, res.Content)
		}
	}
	r.turns = len(turns)
	var end struct {
		Reward  *float64 `json:"reward"`
		Reasons []any    `json:"reasons"`
	}
	if err := postJSON(ctx, base+"/api/episodes/"+ep.ID+"/end", map[string]any{}, &end); err != nil {
		return r, fmt.Errorf("end the episode: %w", err)
	}
	if end.Reward == nil {
		return r, fmt.Errorf("the episode was not scored")
	}
	r.reward = *end.Reward
	if r.reward != 1 {
		return r, fmt.Errorf("reward %v, want 1: %v", r.reward, end.Reasons)
	}
	return r, nil
}

func postJSON(ctx context.Context, url string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}
