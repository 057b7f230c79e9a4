package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExportDialectFlags: the dialect flags reach the export and a bad one
// is refused with the choices, before anything is read or written.
func TestExportDialectFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dialect", "claude"}, `export: dialect "claude" is not known: use openai, gemini, pyautogui`},
		{[]string{"--dialect", "gemini", "--format", "agentnet"}, "dialect gemini goes with the parquet and jsonl formats, not agentnet"},
		{[]string{"--fractions"}, "fractions is for --dialect pyautogui"},
		{[]string{"--dialect", "openai", "--fractions"}, "fractions is for the pyautogui dialect, not openai"},
	} {
		var stdout, stderr bytes.Buffer
		dir := t.TempDir()
		args := append([]string{"--out", dir + "/o.parquet"}, append(c.args, dir)...)
		err := exportCmd(context.Background(), args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("deskenv export %v: %v, want %q", c.args, err, c.want)
		}
	}
	var stdout, stderr bytes.Buffer
	_ = exportCmd(context.Background(), []string{"--help"}, &stdout, &stderr)
	for _, want := range []string{"[--dialect openai|gemini|pyautogui [--fractions]]", "-dialect", "-fractions"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("deskenv export --help lacks %q:\n%s", want, stderr.String())
		}
	}
}
