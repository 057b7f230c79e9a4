package task_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/deskenv/deskenv/task"
)

// A task file parsed and judged: its evaluator reads the desktop user's
// home, so an Env without a display is enough to score it before and after
// the work is done.
func ExampleTask_Evaluate() {
	t, err := task.Parse([]byte(`{
	  "id": "hello-file",
	  "instruction": "Create ~/hello.txt containing: hello world",
	  "evaluator": {"type": "file_contains", "path": "~/hello.txt", "contains": "hello world"}
	}`), "hello-file.json")
	if err != nil {
		log.Fatal(err)
	}
	home, err := os.MkdirTemp("", "example-home-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	env := task.NewEnv(nil, home, nil) // no display: files and commands only

	score := func() {
		out, err := t.Evaluate(context.Background(), env)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("reward %g, %s passed: %v\n", out.Reward, out.Reasons[0].Check, out.Reasons[0].Passed)
	}
	score()
	if err := os.WriteFile(filepath.Join(home, "hello.txt"), []byte("hello world\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	score()
	// Output:
	// reward 0, file_contains ~/hello.txt passed: false
	// reward 1, file_contains ~/hello.txt passed: true
}
