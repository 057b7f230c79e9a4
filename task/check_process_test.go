package task

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestListProcessesFakeProcfs lists a procfs written by the test: a live
// process whose kernel name holds ") ", a zombie, one that vanished between
// the listing and the read (its directory without files), this process, and
// /proc's non-process entries. Only the live one is listed.
func TestListProcessesFakeProcfs(t *testing.T) {
	root := t.TempDir()
	const tail = " 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 100 0 0"
	files := map[string]map[string]string{
		"100":  {"stat": "100 (a) b) S 1 100 100" + tail, "comm": "a) b\n", "cmdline": "/usr/bin/a) b --flag x\x00y\x00"},
		"101":  {"stat": "101 (z) Z 1 101 101" + tail, "comm": "z\n", "cmdline": ""},
		"102":  {},
		"103":  {"stat": "103 (kworker/0:1) I 2 0 0" + tail, "comm": "kworker/0:1\n", "cmdline": ""},
		"7":    {"stat": "7 (self) S 1 7 7" + tail, "comm": "self\n", "cmdline": "self\x00"},
		"self": {},
		"sys":  {},
	}
	for dir, fs := range files {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range fs {
			if err := os.WriteFile(filepath.Join(root, dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := listProcesses(context.Background(), root, uint32(os.Geteuid()), 7)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]ProcessInfo{
		100: {PID: 100, Name: "a)", Comm: "a) b", Cmdline: "/usr/bin/a) b --flag x y"},
		103: {PID: 103, Name: "kworker/0:1", Comm: "kworker/0:1"},
	}
	if len(got) != len(want) {
		t.Fatalf("listProcesses = %+v, want %+v", got, want)
	}
	for _, p := range got {
		if p != want[p.PID] {
			t.Errorf("listProcesses gave %+v, want %+v", p, want[p.PID])
		}
	}

	// Another user's processes are not the desktop's.
	if got, err := listProcesses(context.Background(), root, uint32(os.Geteuid())+1, 7); err != nil || len(got) != 0 {
		t.Errorf("listProcesses for another user = %+v, %v; want none", got, err)
	}
	if _, err := listProcesses(context.Background(), filepath.Join(root, "none"), 0, 0); err == nil {
		t.Error("listProcesses of a missing procfs: no error")
	}
}
