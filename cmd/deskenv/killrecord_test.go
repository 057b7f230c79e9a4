package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deskenv/deskenv/record"
)

// TestKillDuringRecording: an agent clicks and types with screenshot:false
// while the appliance records, and the appliance is killed (SIGKILL) 50 ms
// later, before the recorder observed the screen after them. Started again
// on the same --episodes, it repairs the episode: incomplete, with a step
// for each action (after_missing), and the export has their rows (issue 13:
// 0 rows for 2 actions).
func TestKillDuringRecording(t *testing.T) {
	bin := buildBinary(t)
	episodes, data := t.TempDir(), t.TempDir()
	// A home of its own: the default one is shared by every deskenv on the
	// machine, and another's reset may be restoring it while this one starts.
	args := []string{"--addr", "127.0.0.1:0", "--no-stream", "--episodes", episodes, "--home", t.TempDir(),
		"--operator-token", testOperator, "--agent-token", testAgent}
	reachableHomes(t, args)
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+data)
		base, _ := startAs(t, cmd)
		return cmd, base
	}
	cmd, base := start()
	if s, body := request(t, "POST", base+"/api/recording/start", testOperator, strings.NewReader(`{"episode_id":"killed","source":"agent"}`)); s != 201 {
		t.Fatalf("start recording: %d %s", s, body)
	}
	ctx := context.Background()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + testAgent}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	// The granular tools take screenshot:false (the computer tool always
	// answers with one).
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"left_click", map[string]any{"coordinate": []int{200, 200}, "screenshot": false}},
		{"type", map[string]any{"text": "a <b> & c", "screenshot": false}},
	} {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = call.tool, call.args
		args := call.args
		if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
			t.Fatalf("%v: %v %+v", args, err, res)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // its Xvfb and session go with it

	_, base = start() // repairs what it finds under --episodes
	dir := filepath.Join(episodes, "killed")
	rec, err := record.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, s := range rec.Steps {
		acts = append(acts, s.Action.String())
	}
	want := []string{`{"action":"left_click","coordinate":[200,200]}`, `{"action":"type","text":"a <b> & c"}`}
	if rec.Meta.Status != record.StatusIncomplete || strings.Join(acts, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the restart: status %s, steps\n%s\nwant incomplete with\n%s", rec.Meta.Status, strings.Join(acts, "\n"), strings.Join(want, "\n"))
	}
	st, err := record.Export(ctx, episodes, filepath.Join(t.TempDir(), "train.jsonl"), record.ExportOptions{Format: "jsonl"})
	if err != nil || st.Rows != 2 {
		t.Errorf("export after the restart: %d rows, %v; want 2", st.Rows, err)
	}
	if s, body := request(t, "GET", base+"/api/recording/episodes", testOperator, nil); s != 200 || !strings.Contains(body, `"status": "incomplete"`) {
		t.Errorf("the restarted appliance lists: %d %s", s, body)
	}
}
